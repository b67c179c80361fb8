"""Benchmark what a traffic mix costs the client: the pick, the request head, the per-target recording.

No Locust run, no network: each part of the request path a mix adds is timed in a loop, in this
process, with `time.perf_counter` (best of `--repeat` rounds, per call):

1. the weighted pick: `sm_locust.mix.Picker.next` (alias table) against cumulative weights + bisect,
   for 2, 1,000 and 1,000,000 targets;
2. `MixedPool.next` (payload pick + target pick + the (body, target) invocation);
3. the fast transport's request head and SigV4 signature for requests drawn from a Zipf(1.1) mix of
   1, 100, 1,000 and 10,000 models (each target is a request shape the signer and head caches keep);
4. `TargetStats.on_request` (what each request event costs the per-target recorder);
5. the recorder's memory for 1,000 and 100,000 targets (tracemalloc: what the `TargetTable` holds after
   `--requests` Zipf(1.1) requests), per target and in total;
6. with `--emulation RUNS`: `sm-locust run --target-models zipf:S:N` (`--users` users, `--seconds`) against
   the multi-model emulation (`serve --multi-model`, N models of 100 MB, memory for `--fit` of them, 2 ms
   download + 3 ms load), once per seed: the hit rate summary.json reports vs the mean of 10
   `lru_simulation`s of the same distribution and length (other seeds), and whether every target's
   count equals the endpoint's per-model counter.

    python bench/mix.py [--repeat 5] [--requests 300000] [--emulation 3 --zipf 1.1 --models 100 --fit 30]

Figures are printed, not asserted (tests/mix/test_targets_record.py bounds the memory per target).
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import random
import time
import tracemalloc

import locust  # noqa: F401  (gevent patching before botocore)
from locust.env import Environment

from botocore.credentials import Credentials

from sm_locust.invocation import Invocation
from sm_locust.mix import Picker, parse_mix, zipf_weights
from sm_locust.mix.pool import MixedPool
from sm_locust.payloads import PayloadPool
from sm_locust.record.targets import TargetStats, TargetTable
from sm_locust.transport.fast import FastSageMakerClient

BODY = b'{"instances": [[0.1, 0.2, 0.3, 0.4]]}' * 25  # ~1 KB


def per_call_us(fn, calls: int, repeat: int) -> float:
    """Best-of-`repeat` microseconds per call of `fn` (a no-argument callable), over `calls` calls."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for _ in itertools.repeat(None, calls):
            fn()
        best = min(best, time.perf_counter() - started)
    return best / calls * 1e6


def bisect_picker(weights: list[float], seed: int):
    cumulative = list(itertools.accumulate(weights))
    total, draw, last = cumulative[-1], random.Random(seed).random, len(weights) - 1
    return lambda: min(bisect.bisect_right(cumulative, draw() * total), last)


def picks(repeat: int) -> None:
    print("1. weighted pick, µs per call (alias table vs cumulative weights + bisect)")
    for n in (2, 1000, 1_000_000):
        weights = zipf_weights(1.1, n)
        alias = Picker(weights, seed=1).next
        cumulative = bisect_picker(weights, 1)
        print(f"   {n:>9,} targets: alias {per_call_us(alias, 200_000, repeat):.3f}  "
              f"bisect {per_call_us(cumulative, 200_000, repeat):.3f}")


def pools(repeat: int) -> None:
    print("2. MixedPool.next (payload + target + invocation), µs per call")
    bodies = PayloadPool([Invocation(BODY), Invocation(BODY + b" ")], "two bodies")
    print(f"   no mix (PayloadPool.next): {per_call_us(bodies.next, 200_000, repeat):.3f}")
    for n in (2, 1000, 100_000):
        pool = MixedPool(bodies, parse_mix(f"zipf:1.1:{n}"), seed=1)
        for _ in range(200_000):  # fill the (body, target) cache as a run would
            pool.next()
        print(f"   {n:>9,} targets: {per_call_us(pool.next, 200_000, repeat):.3f}")


def heads(repeat: int) -> None:
    print("3. fast transport: request head + SigV4 signature, µs per request (no network)")
    client = FastSageMakerClient(Environment(), "ep", endpoint_url="http://127.0.0.1:9", region="us-east-1",
                                 credentials=Credentials("AKIDBENCH", "bench-secret"))
    bodies = PayloadPool([Invocation(BODY)], "one body")
    for n in (1, 100, 1000, 10_000):
        pool = MixedPool(bodies, parse_mix(f"zipf:1.1:{n}" if n > 1 else "model.tar.gz"), seed=1)
        invocations = iter(itertools.cycle([pool.next() for _ in range(100_000)]))

        def one(invocations=invocations) -> None:
            invocation = next(invocations)
            client._head(client._invoke_path, client._invoke_url, invocation.http_headers(), invocation.body)

        print(f"   {n:>9,} targets: {per_call_us(one, 50_000, repeat):.2f}")


def recording(repeat: int) -> None:
    print("4. TargetStats.on_request, µs per request event")
    stats = TargetStats(None)
    names = parse_mix("zipf:1.1:1000").names
    picker = Picker(zipf_weights(1.1, 1000), seed=2).next
    contexts = [{"endpoint": "ep", "variant": None, "target": names[picker()]} for _ in range(10_000)]
    events = iter(itertools.cycle(contexts))

    def one() -> None:
        stats.on_request("InvokeEndpoint", "ep", 12.3, None, next(events))

    print(f"   1,000 targets: {per_call_us(one, 200_000, repeat):.3f}")


def memory(requests: int) -> None:
    print(f"5. recorder memory after {requests:,} Zipf(1.1) requests (tracemalloc)")
    for n in (1000, 100_000):
        names = parse_mix(f"zipf:1.1:{n}").names
        picker = Picker(zipf_weights(1.1, n), seed=3).next
        rng = random.Random(4)
        samples = [(names[picker()], rng.lognormvariate(3.0, 0.4)) for _ in range(requests)]
        tracemalloc.start()
        table = TargetTable()
        for name, ms in samples:
            table.add(name, ms, False)
        held, _peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"   {n:>9,} targets in the mix, {len(table.counts):,} seen, {len(table.hists):,} with a histogram: "
              f"{held / 1e6:.2f} MB, {held / len(table.counts):,.0f} bytes per target seen")


def emulation(args: argparse.Namespace) -> None:
    import json
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    from sm_locust.endpoint.faults import EndpointConfig
    from sm_locust.endpoint.modelcache import lru_simulation
    from sm_locust.endpoint.multimodel import MultiModelConfig
    from sm_locust.endpoint.server import LocalEndpoint

    spec = f"zipf:{args.zipf:g}:{args.models}"
    payload = Path(__file__).resolve().parents[1] / "sm_locust" / "data" / "ranking_10rows.json"
    print(f"6. {spec} against the emulation ({args.fit} of {args.models} models fit), {args.users} users, "
          f"{args.seconds} s per run")
    mix = parse_mix(spec)
    for seed in range(1, args.emulation + 1):
        config = EndpointConfig(port=0, multi_model=MultiModelConfig(
            model_count=args.models, model_size_mb="100", memory_mb=100 * args.fit, download_ms=2, load_ms=3))
        with tempfile.TemporaryDirectory() as tmp, LocalEndpoint(config, log_path=Path(tmp) / "endpoint.log") as ep:
            run = subprocess.run([sys.executable, "-m", "sm_locust", "run", "--endpoint-name", "ep", "--endpoint-url",
                                  ep.url, "--payload", str(payload), "--target-models", spec, "--seed", str(seed),
                                  "-u", str(args.users), "-r", "100", "-t", f"{args.seconds}s", "--out",
                                  f"{tmp}/run", "-q", "--", "--stop-timeout", "10"], capture_output=True, text=True)
            if run.returncode not in (0, 1):
                print(f"   seed {seed}: the run failed: {run.stderr.strip()[-300:]}")
                continue
            stats = ep.stats()
            summary = json.loads((Path(tmp) / "run" / "summary.json").read_text())
        requests = summary["totals"]["requests"]
        measured = summary["model_cache"]["hit_rate"]
        simulated = [lru_simulation([mix.names[i] for i in Picker(mix.weights, 1000 + k, 0).sequence(requests)],
                                    100, 100 * args.fit).hit_rate for k in range(10)]
        models = stats["models"]
        shown = [t for t in summary["targets"] if t["name"] != "others"]
        equal = all(t["requests"] == models[t["name"]]["requests"] for t in shown) and \
            sum(m["requests"] for m in models.values()) == requests
        mean = sum(simulated) / len(simulated)
        print(f"   seed {seed}: {requests:,} requests, hit rate {measured:.4f} measured vs {mean:.4f} simulated "
              f"({100 * (measured - mean):+.2f} points; simulations {min(simulated):.4f}..{max(simulated):.4f}); "
              f"per-target counts {'equal' if equal else 'DIFFER from'} the endpoint's")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--requests", type=int, default=300_000)
    parser.add_argument("--emulation", type=int, default=0, metavar="RUNS",
                        help="also run RUNS load tests against the multi-model emulation (section 6)")
    parser.add_argument("--zipf", type=float, default=1.1)
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--fit", type=int, default=30)
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--only-emulation", action="store_true", help="skip sections 1-5")
    args = parser.parse_args()
    if not args.only_emulation:
        picks(args.repeat)
        pools(args.repeat)
        heads(args.repeat)
        recording(args.repeat)
        memory(args.requests)
    if args.emulation:
        emulation(args)


if __name__ == "__main__":
    main()
