"""Benchmark `--log-requests`' cost per request (sm_locust.record.requests_log), no Locust, no network.

Feeds `--requests` (200,000) stream request events, as the contract's StreamMeasurement fires them
(a `TTFT` entry, an `InterChunk` entry, the stream entry with its 64 chunk gaps), through Locust's
own `EventHook`, once without the log and once with it (the listener, then the token accounting's
`complete` with a 64-token sample), and writes the rows as the writer greenlet does (every
`--batch` rows, gzip level 1, into a temporary folder). Prints microseconds per request for the
event path alone, the added listener + completion, and the write, and the bytes per row on disk.
Figures are printed, not asserted.

    python bench/request_log.py [--requests 200000] [--batch 2000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from locust.event import EventHook

from sm_locust.llm.tokens import RequestTokens
from sm_locust.record.requests_log import RequestLog

STREAM = "InvokeEndpointWithResponseStream"


def fire_requests(event: EventHook, count: int, gaps: list[float], log: RequestLog | None, sample: RequestTokens,
                  batch: int) -> tuple[float, float]:
    """(seconds on the request path, seconds writing) for `count` stream requests."""
    path_s = write_s = 0.0
    context = {"endpoint": "ep", "chunks": len(gaps) + 1, "ttft_ms": 20.0, "inter_chunk_ms": gaps}
    for i in range(count):
        started = time.perf_counter()
        event.fire(request_type="TTFT", name="ep", response_time=20.0, response_length=10, exception=None,
                   context={}, start_time=1.0e9 + i)
        event.fire(request_type="InterChunk", name="ep", response_time=25.0, response_length=len(gaps),
                   exception=None, context={}, start_time=1.0e9 + i)
        event.fire(request_type=STREAM, name="ep", response_time=1600.0, response_length=4096, exception=None,
                   context=context, start_time=1.0e9 + i)
        if log is not None:
            log.complete(sample)
        path_s += time.perf_counter() - started
        if log is not None and (i + 1) % batch == 0:
            started = time.perf_counter()
            log.write_pending(final=True)
            write_s += time.perf_counter() - started
    if log is not None:
        started = time.perf_counter()
        log.write_all()
        log.writer.close()
        write_s += time.perf_counter() - started
    return path_s, write_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=2000, help="rows per write (the writer's once-a-second batch)")
    args = parser.parse_args()
    gaps = [25.0 + (i % 7) for i in range(63)]
    sample = RequestTokens(e2e_ms=1600.0, ttft_ms=20.0, itl_ms=gaps + [25.0], output_tokens=64, input_tokens=512,
                           source="server")
    base = EventHook()
    base.add_listener(lambda **_kw: None)  # Locust's stats listener stands in: one listener either way
    bare_s, _ = fire_requests(base, args.requests, gaps, None, sample, args.batch)
    with tempfile.TemporaryDirectory() as folder:
        logged = EventHook()
        logged.add_listener(lambda **_kw: None)
        log = RequestLog(Path(folder), max_pending=args.batch * 2)
        log.accounted = True
        logged.add_listener(log.on_request)
        path_s, write_s = fire_requests(logged, args.requests, gaps, log, sample, args.batch)
        size = (Path(folder) / "requests.jsonl.gz").stat().st_size
        counts = log.counts()
    per = 1e6 / args.requests
    print(f"requests: {args.requests:,} (64-token streams), rows written: {counts['rows']:,}, "
          f"dropped: {counts['dropped']}")
    print(f"event path without the log: {bare_s * per:.2f} us/request")
    print(f"event path with the log:    {path_s * per:.2f} us/request (+{(path_s - bare_s) * per:.2f} us: "
          f"listener + token completion)")
    print(f"writing (gzip level 1):     {write_s * per:.2f} us/request, {size / max(1, counts['rows']):.1f} bytes/row")
    print(f"total added:                {(path_s - bare_s + write_s) * per:.2f} us/request")


if __name__ == "__main__":
    main()
