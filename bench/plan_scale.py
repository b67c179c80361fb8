"""How long `sm-locust sweep FILE --plan` takes as the grid grows: the pipeline simulation behind the
plan's wall-time estimate, and the whole command.

`--plan` of a 10,000-configuration grid never seemed to finish (issue 23 item 5): the scheduler
answered each question (how many alive, the next to deploy or test) by scanning every configuration,
so simulating N configurations cost O(N^2). It now keeps counts, a cursor and a heap as states
change. This script times `sweep.pipeline.simulate` with the kept counts and with the scanning rules
(the reference the unit test compares it to; only up to 2,000 configurations: it is quadratic), then
the whole `sm-locust sweep --plan` command on a 100 x 100 local grid in a child process.

    .venv/bin/python bench/plan_scale.py

Figures are printed, not asserted (a shared machine moves them by several %).
"""

from __future__ import annotations

import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sm_locust.sweep import pipeline
from sm_locust.sweep.pipeline import Durations, Pipeline, simulate

ROOT = Path(__file__).resolve().parents[1]


class Scanning(Pipeline):
    """The scheduler's rules asked by scanning every configuration (the old cost)."""

    @property
    def alive(self) -> int:
        return sum(1 for s in self.state.values() if s in pipeline.ALIVE)

    @property
    def finished(self) -> bool:
        return all(s == pipeline.DONE for s in self.state.values())

    def deploys_to_start(self) -> list[int]:
        return self.in_state(pipeline.WAITING)[:max(0, self.max_alive - self.alive)]

    def next_test(self) -> int | None:
        if self.in_state(pipeline.TESTING):
            return None
        ready = self.in_state(pipeline.READY)
        return ready[0] if ready else None


def timed(n: int, cls: type) -> float:
    rng = random.Random(n)
    durations = {i: Durations(rng.choice([300.0, 600.0]), 120.0, 60.0) for i in range(n)}
    original = pipeline.Pipeline
    pipeline.Pipeline = cls
    try:
        start = time.perf_counter()
        simulate(durations, 4)
        return time.perf_counter() - start
    finally:
        pipeline.Pipeline = original


def main() -> int:
    print("configurations  simulate (kept counts)  simulate (scanning)")
    for n in (500, 1000, 2000, 5000, 10000):
        slow = f"{timed(n, Scanning):8.2f} s" if n <= 2000 else "       -"
        print(f"{n:>14}  {timed(n, Pipeline):20.3f} s  {slow}")
    with tempfile.TemporaryDirectory() as work:
        body = Path(work) / "body.json"
        body.write_bytes((ROOT / "sm_locust" / "data" / "ranking_10rows.json").read_bytes())
        grid = list(range(1, 101))
        (Path(work) / "big.yaml").write_text(
            f"name: big\nendpoint: {{service_time_ms: 10}}\ngrid: {{max_concurrency: {grid}, workers: {grid}}}\n"
            "load: {payload: body.json, users: 2, run_time: 3s}\nobjective: {target_rps: 10, slo_ms: 100}\n"
            "price_per_hour: 0.2\nmax_parallel_endpoints: 4\n")
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "sm_locust", "sweep", "big.yaml", "--plan"], cwd=work,
                              capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        print(f"sm-locust sweep --plan, 10,000 configurations: exit {done.returncode}, {wall:.2f} s")
        print(done.stdout.splitlines()[-2] if done.stdout else done.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
