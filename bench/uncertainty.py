"""How long the 95 % intervals take (sm_locust/measure/uncertainty.py): a plateau step, a long step, a week.

A step's intervals are computed once, when the search judges it (or when summary.json is written,
for a step the recorder cut); the recorder keeps a week-long step as at most 256 merged blocks plus
its last 10 minutes second by second (record/accumulate.py), and the whole run as at most 256 blocks.
This prints the time `steady.window_intervals` takes (rps and goodput by batch means, p50 / p95 / p99
from one 2,000-resample block bootstrap) on synthetic windows of each of those shapes, and, for
scale, on a week of seconds held one by one (what the recorder never holds). Times are wall-clock
on this machine; the load average is printed beside them.

    .venv/bin/python bench/uncertainty.py
"""

from __future__ import annotations

import os
import time

import numpy as np

from sm_locust.measure.steady import window_intervals
from sm_locust.measure.timeline import Second
from sm_locust.record.accumulate import RunTimeline

WEEK_S = 7 * 24 * 3600


def seconds(n: int, rate: float = 100.0, seed: int = 0) -> list[Second]:
    """`n` one-second samples: Poisson counts, a latency histogram of ~20 Locust buckets each."""
    rng = np.random.default_rng(seed)
    counts = rng.poisson(rate, n)
    out = []
    for i, c in enumerate(counts):
        values, hits = np.unique(np.round(rng.lognormal(np.log(40.0), 0.3, int(c))), return_counts=True)
        out.append(Second(t=float(i + 1), users=8, spawning=False, requests=int(c), failures=0,
                          hist=dict(zip(values.astype(int).tolist(), hits.tolist(), strict=True))))
    return out


def week_step_as_kept() -> tuple[list[Second], list[Second]]:
    """A week-long step fed second by second to the recorder's RunTimeline: (the step as it keeps it,
    the whole run as it keeps it). The seconds are generated in chunks so memory stays flat."""
    timeline = RunTimeline(origin=0.0)
    chunk = 3600
    for start in range(0, WEEK_S, chunk):
        for s in seconds(chunk, seed=start):
            s.t += start
            timeline.add(s)
    return timeline.view(), timeline.run_seconds()


def timed(label: str, window: list[Second], repeat: int = 3) -> None:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        intervals = window_intervals(window)
        best = min(best, time.perf_counter() - started)
    rps = intervals["rps"].as_list()
    p95 = intervals["p95_ms"].as_list()
    print(f"| {label} | {len(window):,} | {best * 1000:,.1f} | rps {rps}, p95 {p95} |", flush=True)


def main() -> int:
    print(f"uncertainty bench: load average {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs, shared)\n")
    print("| window | samples | ms (best of 3) | intervals |")
    print("|---|---|---|---|")
    timed("a plateau step's steady window (8 s)", seconds(8))
    timed("a 30-s step's steady window (24 s)", seconds(24))
    timed("a 10-min step", seconds(600))
    started = time.perf_counter()
    step, run = week_step_as_kept()
    fed = time.perf_counter() - started
    timed("a week-long step as the recorder keeps it", step)
    timed("a week-long run's whole-run blocks", run)
    timed("a week of seconds held one by one (never held)", seconds(WEEK_S), repeat=1)
    print(f"\n(feeding the week of seconds to RunTimeline, generation included: {fed:.0f} s; load average "
          f"{os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
