"""Benchmark the multi-model emulation (`sm-locust serve --multi-model`) against `lru_simulation`.

Why: issue 21's acceptance compares the cache-hit rate a Zipf mix measures against the emulation
with an LRU simulation of the same distribution (within 3 points). The simulation serves one
request at a time; the emulation serves many at once, and a request that arrives while its model
is still loading waits and is a miss (docs/endpoint.md). This prints how far the two drift apart
as concurrency and load time grow, so the acceptance test can pick settings where they agree, and
what the MME path costs a request that hits.

Each profile starts the endpoint (2 gunicorn workers, 200 models of 100 MB, 2,000 MB of memory:
20 fit), sends a seeded Zipf(1.1) sequence of 2,000 requests from U threads (each its own
keep-alive connection, taking the next request of the shared sequence), then prints:
- the hit rate the server counted (`/_sm_locust/stats` cache_hits / cache_lookups) and the one the
  client saw (answers without `X-Sm-Locust-Model-Wait-Ms`): they must be equal;
- `lru_simulation` of the same sequence in sending order, and of 5 other seeded sequences of the
  same distribution (their mean and range: the sampling spread the acceptance test also meets);
- requests per second and the median latency of hits and of misses.
The overhead rows: the MME path of a hit timed in process (5,000 calls), then 2,000 requests one at
a time to one hot model and to a plain endpoint in alternating rounds (on a busy machine the
difference is within the noise).

    .venv/bin/python bench/multimodel.py
    .venv/bin/python bench/multimodel.py --requests 500   # quicker
"""

from __future__ import annotations

import argparse
import http.client
import random
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sm_locust.endpoint.counters import SharedCounters  # noqa: E402
from sm_locust.endpoint.faults import EndpointConfig  # noqa: E402
from sm_locust.endpoint.modelcache import lru_simulation, model_names  # noqa: E402
from sm_locust.endpoint.multimodel import WAIT_HEADER, MultiModelConfig, MultiModelEmulator  # noqa: E402
from sm_locust.endpoint.server import LocalEndpoint  # noqa: E402

BODY = (ROOT / "sm_locust" / "data" / "ranking_10rows.json").read_bytes()
MODELS, SIZE_MB, MEMORY_MB, ZIPF_S = 200, 100, 2000, 1.1
# (users, download ms, load ms)
PROFILES = [(1, 20, 20), (4, 5, 5), (8, 5, 5), (8, 20, 20), (8, 100, 100), (32, 20, 20)]


def zipf(length: int, seed: int) -> list[str]:
    weights = [1.0 / rank ** ZIPF_S for rank in range(1, MODELS + 1)]
    return random.Random(seed).choices(model_names(MODELS), weights=weights, k=length)


def send(url: str, sequence: list[str], users: int, target_header: bool = True) -> list[tuple[float, bool]]:
    """Send `sequence` from `users` threads; (latency ms, waited) per request."""
    host, port = url.removeprefix("http://").split(":")
    nxt = iter(sequence)
    lock = threading.Lock()
    results: list[tuple[float, bool]] = []

    def user() -> None:
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        while True:
            with lock:
                name = next(nxt, None)
            if name is None:
                break
            headers = {"Content-Type": "application/json"}
            if target_header:
                headers["X-Amzn-SageMaker-Target-Model"] = name
            t0 = time.perf_counter()
            conn.request("POST", "/endpoints/bench/invocations", BODY, headers)
            response = conn.getresponse()
            response.read()
            ms = (time.perf_counter() - t0) * 1000.0
            assert response.status == 200, response.status
            with lock:
                results.append((ms, response.getheader(WAIT_HEADER) is not None))
        conn.close()

    threads = [threading.Thread(target=user) for _ in range(users)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def profile(users: int, download_ms: float, load_ms: float, length: int) -> None:
    config = EndpointConfig(port=0, workers=2, multi_model=MultiModelConfig(
        model_count=MODELS, model_size_mb=str(SIZE_MB), memory_mb=MEMORY_MB, download_ms=download_ms, load_ms=load_ms))
    sequence = zipf(length, seed=1)
    with LocalEndpoint(config) as endpoint:
        t0 = time.perf_counter()
        results = send(endpoint.url, sequence, users)
        elapsed = time.perf_counter() - t0
        mm = endpoint.stats()["multi_model"]
    server = mm["cache_hits"] / mm["cache_lookups"]
    client = sum(1 for _, waited in results if not waited) / len(results)
    same = lru_simulation(sequence, SIZE_MB, MEMORY_MB).hit_rate
    others = [lru_simulation(zipf(length, seed), SIZE_MB, MEMORY_MB).hit_rate for seed in range(2, 7)]
    hits = [ms for ms, waited in results if not waited]
    misses = [ms for ms, waited in results if waited]
    print(f"{users:>5} {download_ms:>5g}+{load_ms:<4g} {server:8.1%} {client:8.1%} {same:8.1%} "
          f"{(server - same) * 100:+7.1f} {statistics.mean(others):8.1%} ({min(others):.1%}-{max(others):.1%}) "
          f"{len(results) / elapsed:7.0f} {statistics.median(hits) if hits else float('nan'):7.1f} "
          f"{statistics.median(misses) if misses else float('nan'):7.1f}", flush=True)


def in_process_us(n: int = 5000) -> float:
    """The MME path alone, in this process: TargetModel check, cache admission and release, counters."""
    emulator = MultiModelEmulator(MultiModelConfig(model_count=MODELS, download_ms=0, load_ms=0), SharedCounters())
    environ = {"HTTP_X_AMZN_SAGEMAKER_TARGET_MODEL": model_names(MODELS)[0]}

    def answer(respond, service_s=None):
        return [b""]

    emulator.serve(environ, None, answer, None)  # loads the model
    t0 = time.perf_counter()
    for _ in range(n):
        emulator.check(environ)
        emulator.serve(environ, None, answer, None)
    return (time.perf_counter() - t0) / n * 1e6


def overhead(length: int, rounds: int = 4) -> None:
    print(f"overhead: the MME path of a hit in process (check, admission, release, counters): {in_process_us():.1f} µs")
    mme = EndpointConfig(port=0, multi_model=MultiModelConfig(model_count=MODELS, download_ms=0, load_ms=0))
    hot = [model_names(MODELS)[0]] * (length // rounds)
    means: dict[str, list[float]] = {"plain": [], "mme": []}
    with LocalEndpoint(mme) as with_models, LocalEndpoint(EndpointConfig(port=0)) as plain:
        send(with_models.url, hot[:100], 1)  # warm up (and load the model)
        send(plain.url, hot[:100], 1, target_header=False)
        for _ in range(rounds):  # alternating, so a busy moment of the machine hits both
            means["mme"].append(statistics.mean(ms for ms, _ in send(with_models.url, hot, 1)))
            means["plain"].append(statistics.mean(ms for ms, _ in send(plain.url, hot, 1, target_header=False)))
    plain_ms, mme_ms = statistics.median(means["plain"]), statistics.median(means["mme"])
    print(f"overhead: mean latency one request at a time, {rounds} alternating rounds of {len(hot)} requests "
          f"(median of the rounds' means): plain {plain_ms:.3f} ms, multi-model hit {mme_ms:.3f} ms "
          f"({(mme_ms - plain_ms) * 1000:+.0f} µs); rounds plain {[round(m, 3) for m in means['plain']]}, "
          f"multi-model {[round(m, 3) for m in means['mme']]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--overhead-only", action="store_true")
    args = parser.parse_args()
    if args.overhead_only:
        overhead(args.requests)
        return 0
    print(f"{MODELS} models x {SIZE_MB} MB, {MEMORY_MB} MB memory ({MEMORY_MB // SIZE_MB} fit), Zipf s={ZIPF_S}, "
          f"{args.requests} requests, 2 workers")
    print("users dl+load   server   client     sim1  diff pt  sim 5 others           req/s   hit p50 miss p50")
    for users, download_ms, load_ms in PROFILES:
        profile(users, download_ms, load_ms, args.requests)
    overhead(args.requests)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
