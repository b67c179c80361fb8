"""Time a 2x3 local sweep, the way a user runs it, and print its table.

Runs `sm-locust sweep examples/sweeps/batching.yaml` (dynamic batching off/on x 1, 2, 4
concurrency slots of 40 ms on the embedded endpoint; plateau search per configuration, SLO p95
150 ms, priced as one ml.c5.xlarge each) in a child process and reports:

- the wall time of the whole command, measured here with time.perf_counter() from launching it to
  its exit: Python start-up, every check, six endpoint starts and stops, six plateau searches
  (Locust in a child process each), six reports, sweep.json/csv/html;
- per configuration: capacity, knee, p95 at the knee, $ per 1M, and the recommendation.

    .venv/bin/python bench/sweep.py                       # the 2x3 sweep (a few minutes)
    .venv/bin/python bench/sweep.py --set load.step_seconds=5 --keep /tmp/sweep-bench

Figures are printed, not asserted: the machine is shared, so they move by several %. Measured on
the 2-core development machine, shared with other test runs at the time: 563 s (9.4 min) for the
six configurations (README.md, "Sweeps", has the output).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT / "examples" / "sweeps" / "batching.yaml"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", default=str(SWEEP), help="sweep file (default examples/sweeps/batching.yaml)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="passed to sm-locust sweep --set")
    parser.add_argument("--keep", default=None, help="sweep folder to keep (default: a temporary one)")
    args = parser.parse_args()
    out = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="sm-locust-sweep-bench-")) / "sweep"
    cmd = [sys.executable, "-m", "sm_locust", "sweep", args.file, "--out", str(out)]
    for item in args.overrides:
        cmd += ["--set", item]
    started = time.perf_counter()
    code = subprocess.call(cmd)
    wall = time.perf_counter() - started
    doc = json.loads((out / "sweep.json").read_text())
    rows = doc["configurations"]
    print()
    print("| configuration | status | capacity req/s | knee users | p95 ms at the knee | $ per 1M | wall s |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for c in rows:
        def f(key, digits=1, c=c):
            value = c.get(key)
            return "-" if value is None else f"{value:.{digits}f}"
        print(f"| {c['label']} | {c['status']} | {f('capacity_rps')} | {c.get('knee_users') or '-'} | "
              f"{f('latency_ms', 0)} | {f('cost_per_1m', 2)} | {f('wall_s', 0)} |")
    print()
    print(f"recommendation: {doc['recommendation']['reason']}")
    print(f"{len(rows)} configurations in {wall:.0f} s ({wall / 60:.1f} min) wall, measured with time.perf_counter() "
          f"around `{' '.join(Path(a).name if a == sys.executable else a for a in cmd[1:])}` (exit {code}); "
          f"results in {out}/")
    return code


if __name__ == "__main__":
    sys.exit(main())
