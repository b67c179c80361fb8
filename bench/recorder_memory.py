"""Benchmark the recorder's memory over a soak run: days of synthetic 1-s samples, no Locust.

Feeds `--days` (7) of synthetic seconds (~400 req/s with 40-bucket histograms, as a busy endpoint
gives, a failure now and then) through what the recorder does with each one: keep it
(`record.accumulate.RunTimeline`), append it to timeline.jsonl (`record.timeline.TimelineWriter`,
into a temporary folder), and every `--checkpoint-seconds` (60, as a real run) measure the steps
and hours for summary.json. Prints, per simulated day, the memory held (tracemalloc: what Python
allocated and still holds) and its peak with `--tracemalloc` (3-5 times slower), and the process's
RSS, then the totals. The recorder kept
every sample before issue 17: ~117 MB per day, ~0.8 GB for a week, and ~4 GB at the end of it while
timeline.json was written. Figures are printed, not asserted (tests/record/test_soak_recorder.py asserts
that memory does not grow with the days fed).

    python bench/recorder_memory.py [--days 7] [--step-hours 0] [--checkpoint-seconds 60] [--tracemalloc]
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import psutil

from sm_locust.measure.timeline import Second
from sm_locust.record.accumulate import RunTimeline
from sm_locust.record.summary import build_summary
from sm_locust.record.timeline import TIMELINE_JSONL, TimelineWriter

BASE = 1704067200.0  # 2024-01-01T00:00:00Z
DAY_S = 86400


def histogram_pool(size: int = 64, buckets: int = 40, seed: int = 7) -> list[dict[int, int]]:
    """`size` different histograms of `buckets` Locust buckets (~2 significant digits) summing to ~400."""
    rng = random.Random(seed)
    pool = []
    for _ in range(size):
        start = rng.randint(12, 30)
        keys = [b for b in range(start, start + buckets)]
        pool.append({k: rng.randint(1, 19) for k in keys})
    return pool


def synthetic_seconds(n: int, *, start: float = BASE, users: int = 10, step_s: int = 0,
                      pool: list[dict[int, int]] | None = None, seed: int = 11) -> Iterator[Second]:
    """`n` seconds of a closed-loop soak: `users` held (or, with `step_s`, one more user every
    `step_s` seconds), ~400 req/s, a failure every ~50 s, client CPU ~30 %. Each second has its own
    histogram dict, as the recorder's samples do."""
    rng = random.Random(seed)
    pool = pool or histogram_pool()
    for i in range(n):
        hist = dict(pool[i % len(pool)])
        requests = sum(hist.values())
        held = users + (i // step_s if step_s else 0)
        yield Second(t=start + i + 1, users=held, spawning=False, requests=requests,
                     failures=1 if rng.random() < 0.02 else 0, hist=hist, interval=1.0,
                     client_cpu_pct=30.0 + rng.random() * 5, backoffs=0)


def checkpoint(timeline: RunTimeline, started_at: float, now: float) -> dict:
    """What the recorder writes every minute, minus Locust's totals: the steps and hours."""
    measured = timeline.measured_steps()
    return build_summary(endpoint="bench", started_at=started_at, ended_at=now, totals={"requests": 0, "failures": 0},
                         errors={}, seconds=(), steps=[record for record, _ in measured], hours=timeline.hours(),
                         complete=False)


def feed(timeline: RunTimeline, seconds: Iterator[Second], *, writer: TimelineWriter | None = None,
         checkpoint_every_s: float = 60.0, on_day=None) -> dict | None:
    """Feed `seconds` as the recorder does; `on_day(day, last_second)` after each simulated day."""
    summary = None
    next_checkpoint = None
    count = 0
    for second in seconds:
        timeline.add(second)
        if writer is not None:
            writer.add(second)
        if next_checkpoint is None:
            next_checkpoint = second.t + checkpoint_every_s
        if checkpoint_every_s and second.t >= next_checkpoint:
            summary = checkpoint(timeline, timeline.origin, second.t)
            next_checkpoint += checkpoint_every_s
        count += 1
        if on_day and count % DAY_S == 0:
            on_day(count // DAY_S, second)
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=float, default=7.0)
    ap.add_argument("--step-hours", type=float, default=0.0, help="one more user every N hours (0: one long step)")
    ap.add_argument("--checkpoint-seconds", type=float, default=60.0)
    ap.add_argument("--tracemalloc", action="store_true", help="also what Python holds (slower)")
    args = ap.parse_args(argv)
    n = int(args.days * DAY_S)
    trace = args.tracemalloc
    if trace:
        tracemalloc.start()
    t0 = time.perf_counter()
    timeline = RunTimeline(BASE)
    base = tracemalloc.get_traced_memory()[0] if trace else 0

    process = psutil.Process()

    def on_day(day: int, second: Second) -> None:
        rss = process.memory_info().rss / 1e6
        line = f"day {day}: RSS {rss:5.0f} MB"
        if trace:
            held, peak = tracemalloc.get_traced_memory()
            line += f", held {(held - base) / 1e6:5.1f} MB, peak {(peak - base) / 1e6:5.1f} MB (tracemalloc)"
        print(f"{line}, {time.perf_counter() - t0:5.0f} s", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        writer = TimelineWriter(Path(tmp) / TIMELINE_JSONL)
        summary = feed(timeline, synthetic_seconds(n, step_s=int(args.step_hours * 3600)), writer=writer,
                       checkpoint_every_s=args.checkpoint_seconds, on_day=on_day)
        writer.close()
        size = (Path(tmp) / TIMELINE_JSONL).stat().st_size
    wall = time.perf_counter() - t0
    held, peak = tracemalloc.get_traced_memory() if trace else (0, 0)
    print(f"fed {n:,} seconds ({args.days:g} days) in {wall:.0f} s; timeline.jsonl {size / 1e6:.0f} MB; "
          f"steps {len((summary or {}).get('steps', []))}, hours {len((summary or {}).get('hours', []))}")
    if trace:
        print(f"recorder memory held at the end: {(held - base) / 1e6:.1f} MB; peak {(peak - base) / 1e6:.1f} MB "
              "(tracemalloc)")
    print(f"max RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
