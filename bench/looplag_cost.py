"""What the loop-lag sampler costs: CPU time of a gevent process with it and without it.

`record.looplag.LoopLagMonitor` wakes every `SAMPLE_INTERVAL_S` on every Locust process while a test
runs. This runs a gevent hub for `--seconds` three ways, in this one process, and prints the CPU
time (user + system, `time.process_time`) each took and the sampler's share of a core:

- idle: nothing but the hub;
- sampler: the monitor's greenlet at its interval (and at `--interval`, when given);
- busy: `--greenlets` greenlets each doing `--work-us` of CPU every 10 ms (a loaded load generator),
  with and without the sampler, and the lag p99 it measured there.

    .venv/bin/python bench/looplag_cost.py --seconds 10

Figures are printed, not asserted: the machine is shared. docs/facts.md quotes what was measured.
"""

from __future__ import annotations

import argparse
import time

import gevent

from sm_locust.measure.looplag import LoopLag
from sm_locust.record.looplag import SAMPLE_INTERVAL_S, CgroupThrottling, LoopLagMonitor


def spin(us: float) -> None:
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        pass


def worker(work_us: float) -> None:
    while True:
        spin(work_us)
        gevent.sleep(0.01)


def measure(seconds: float, interval: float | None, greenlets: int, work_us: float) -> tuple[float, str]:
    monitor = None
    if interval is not None:
        monitor = LoopLagMonitor(interval_s=interval, throttling=CgroupThrottling([]))
        monitor.start()
    load = [gevent.spawn(worker, work_us) for _ in range(greenlets)]
    cpu0, wall0 = time.process_time(), time.perf_counter()
    gevent.sleep(seconds)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    gevent.killall(load)
    lag = ""
    if monitor is not None:
        monitor.stop()
        counts = monitor.take_second()
        if counts is not None:
            figures = LoopLag.of(counts)
            lag = f", {figures.samples} samples, lag p50 {figures.p50_ms} ms p99 {figures.p99_ms} ms"
    return cpu / wall * 100.0, lag


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--interval", type=float, default=None, help="another interval to try, in seconds")
    parser.add_argument("--greenlets", type=int, default=50)
    parser.add_argument("--work-us", type=float, default=100.0)
    args = parser.parse_args()
    intervals = [SAMPLE_INTERVAL_S] + ([args.interval] if args.interval else [])
    idle, _ = measure(args.seconds, None, 0, 0)
    print(f"idle hub: {idle:.2f} % of a core")
    for interval in intervals:
        cpu, lag = measure(args.seconds, interval, 0, 0)
        print(f"sampler every {interval * 1000:g} ms, idle: {cpu:.2f} % of a core (+{cpu - idle:.2f}){lag}")
    busy, _ = measure(args.seconds, None, args.greenlets, args.work_us)
    print(f"busy ({args.greenlets} greenlets x {args.work_us:g} us every 10 ms): {busy:.2f} % of a core")
    for interval in intervals:
        cpu, lag = measure(args.seconds, interval, args.greenlets, args.work_us)
        print(f"busy + sampler every {interval * 1000:g} ms: {cpu:.2f} % of a core (+{cpu - busy:.2f}){lag}")


if __name__ == "__main__":
    main()
