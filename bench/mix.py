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
   `--requests` Zipf(1.1) requests), per target and in total.

    python bench/mix.py [--repeat 5] [--requests 300000]

Figures are printed, not asserted (tests/test_targets_record.py bounds the memory per target).
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--requests", type=int, default=300_000)
    args = parser.parse_args()
    picks(args.repeat)
    pools(args.repeat)
    heads(args.repeat)
    recording(args.repeat)
    memory(args.requests)


if __name__ == "__main__":
    main()
