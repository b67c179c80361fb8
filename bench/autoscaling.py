"""Time the issue's autoscaling sweep on the local fleet emulation and compare it with the model.

Runs `sm-locust sweep examples/sweeps/autoscaling.yaml` (a 20-minute traffic, 20 -> 150 -> 20 req/s,
against min_instances 1 and 2 of a target-tracking policy on InvocationsPerInstance = 4200, one
instance serving 4 x 40 ms, new instances serving after 240 s, the clock x30) in a child process,
as a user runs it, and reports:

- the wall time of the whole command, measured here with time.perf_counter() from launching it to
  its exit (goal: <= 3 min for both configurations on the 2-core development machine);
- per configuration: the first scale-out's reaction and ready times as measured (the polled
  DescribeEndpoint timeline, the metric rebuilt from the requests sent) and as the model gives them
  for the same policy and traffic (`scaling.simulate`), their differences, whether the polled instance
  counts are the emulator's own log, seconds over the SLO, instance-hours and cost;
- the recommendation.

    .venv/bin/python bench/autoscaling.py                  # the issue's example, both configurations
    .venv/bin/python bench/autoscaling.py --runs 2 --keep /tmp/as-bench

Figures are printed, not asserted: the machine is shared, so they move between runs. docs/autoscaling.md
has the figures measured and how.
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
SWEEP = ROOT / "examples" / "sweeps" / "autoscaling.yaml"
GOAL_S = 180.0


def fmt(value, digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def diff(measured, model) -> str:
    return "-" if measured is None or model is None else f"{measured - model:+.0f}"


def same_counts(c: dict) -> str:
    polled, logged = c.get("instances") or [], c.get("emulator_instances")
    if logged is None:
        return "-"
    pairs = [(s["desired"], s["in_service"]) for s in polled] == [(s["desired"], s["in_service"]) for s in logged]
    if not pairs:
        return "no"
    gap = max(abs(p["t_s"] - q["t_s"]) for p, q in zip(polled, logged, strict=True))
    return f"yes (<= {gap:.0f} s apart)"


def one_run(sweep_file: str, out: Path, overrides: list[str]) -> tuple[float, int, dict]:
    cmd = [sys.executable, "-m", "sm_locust", "sweep", sweep_file, "--out", str(out)]
    for item in overrides:
        cmd += ["--set", item]
    started = time.perf_counter()
    code = subprocess.call(cmd)
    wall = time.perf_counter() - started
    return wall, code, json.loads((out / "sweep.json").read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", default=str(SWEEP), help="sweep file (default examples/sweeps/autoscaling.yaml)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="passed to sm-locust sweep --set")
    parser.add_argument("--runs", type=int, default=1, help="how many times to run it (default 1)")
    parser.add_argument("--keep", default=None, help="folder to keep the sweeps in (default: a temporary one)")
    args = parser.parse_args()
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="sm-locust-autoscaling-bench-"))
    walls = []
    for run in range(1, args.runs + 1):
        wall, code, doc = one_run(args.file, base / f"run-{run}", args.overrides)
        walls.append(wall)
        print()
        print(f"run {run}: {wall:.1f} s wall for {len(doc['configurations'])} configurations (goal <= {GOAL_S:.0f} s), "
              f"exit {code}; emulated seconds below")
        print("| configuration | reaction s (model, diff) | ready s (model, diff) | polled = emulator log | "
              "s over SLO | instance-hours | $ | wall s |")
        print("|---|---|---|---|---:|---:|---:|---:|")
        for c in doc["configurations"]:
            print(f"| {c['label']} | {fmt(c.get('reaction_s'))} ({fmt(c.get('model_reaction_s'))}, "
                  f"{diff(c.get('reaction_s'), c.get('model_reaction_s'))}) | {fmt(c.get('ready_s'))} "
                  f"({fmt(c.get('model_ready_s'))}, {diff(c.get('ready_s'), c.get('model_ready_s'))}) | "
                  f"{same_counts(c)} | {fmt(c.get('slo_breach_s'))} | {fmt(c.get('instance_hours'), 3)} | "
                  f"{fmt(c.get('cost_usd'), 2)} | {fmt(c.get('wall_s'))} |")
        print(f"recommendation: {doc['recommendation']['reason']}")
    if len(walls) > 1:
        print(f"\nwall time over {len(walls)} runs: {min(walls):.1f}-{max(walls):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
