"""The autoscaling example with one core kept busy: the right answer or INCONCLUSIVE, never a wrong verdict.

Issue 28's target: with a CPU hog on one core (`python -c 'while 1: pass'`, pinned to core 0), the
autoscaling example (`examples/sweeps/autoscaling.yaml`) either gives the right answer or says
inconclusive, 10 runs out of 10. Each run starts the hog, runs `sm-locust sweep` on the example as a
user would (a fresh sweep folder, `--yes`), stops the hog, and reads sweep.json. Each run's sweep
is named `ranker-scaling-hog-<pid>-<run>` (`--set name=...`; everything else is the example): a
local sweep's cleanup stops this machine's endpoints tagged with its sweep id, so another user's
`sm-locust sweep --cleanup ranker-scaling` (or their run of the same example) on a shared machine
would otherwise stop this bench's endpoints mid-run (seen once: every request failed).

The right answer: min_instances 2. One instance serves 100 req/s (4 slots of 40 ms); the traffic
surges from 20 to 150 req/s for 600 s; with min_instances 1 the instances the policy adds serve only
240 s after it scales out, so the p95 goes over 250 ms for minutes (max_breach_s 0: it loses); with
min_instances 2 the fleet holds 200 req/s from the start (0 s over the SLO) and it is recommended.

Each run is classified:

- right: min_instances 2 recommended, min_instances 1 measured and over the SLO;
- inconclusive: a configuration is INCONCLUSIVE (the load generator, not the endpoint, was the
  bottleneck in both of its measurements), and what is recommended, if anything, is not wrong;
- WRONG: anything else (min_instances 1 recommended, min_instances 2 measured over the SLO, nothing
  recommended though both were measured).

Printed per run: its class, each configuration's status, seconds over the SLO with their interval,
seconds over the SLO while the client was behind, whether it was measured again, the exit code, the
wall time and the load average. Nothing is asserted.

    .venv/bin/python bench/autoscaling_hog.py                 # 10 runs (about 25 minutes)
    .venv/bin/python bench/autoscaling_hog.py --runs 2 --no-hog --keep /tmp/as-hog
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT / "examples" / "sweeps" / "autoscaling.yaml"
RIGHT = "min_instances 2"
WRONG_ONE = "min_instances 1"


def start_hog() -> subprocess.Popen:
    """`python -c 'while 1: pass'`, pinned to core 0 where the platform allows it."""
    def pin() -> None:
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {0})

    return subprocess.Popen([sys.executable, "-c", "while 1: pass"], preexec_fn=pin)


def classify(doc: dict) -> str:
    rows = {c["label"]: c for c in doc.get("configurations") or []}
    recommended = (doc.get("recommendation") or {}).get("label")
    one, two = rows.get(WRONG_ONE, {}), rows.get(RIGHT, {})
    if recommended == WRONG_ONE:
        return "WRONG"
    if two.get("status") == "ok" and (two.get("slo_breach_s") or 0) > 0:
        return "WRONG"  # a verdict that min_instances 2 breaches: the flip
    if recommended == RIGHT and one.get("status") == "ok" and (one.get("slo_breach_s") or 0) > 0:
        return "right"
    if "inconclusive" in (one.get("status"), two.get("status")):
        return "inconclusive"
    return "WRONG"


def describe(c: dict) -> str:
    interval = c.get("breach_s_ci95")
    bounds = f" [{interval[0]:.0f}, {interval[1]:.0f}]" if interval else ""
    breach = c.get("slo_breach_s")
    text = f"{c['label']}: {c['status']}"
    if breach is not None:
        text += f", {breach:.0f} s{bounds} over the SLO"
    if c.get("breach_client_bound_s"):
        text += f" ({c['breach_client_bound_s']:.0f} s of it while the client was behind)"
    if c.get("remeasured"):
        text += ", measured again by itself"
    if c.get("status") == "inconclusive":
        text += f" ({(c.get('reason') or '')[:160]})"
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--no-hog", action="store_true", help="the same runs without the CPU hog (a reference)")
    ap.add_argument("--keep", default=None, help="keep the sweep folders here")
    args = ap.parse_args(argv)
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="sm-locust-hog-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    one, five, _ = os.getloadavg()
    print(f"autoscaling hog bench: {args.runs} runs of {SWEEP.name}, CPU hog {'off' if args.no_hog else 'on core 0'}; "
          f"{os.cpu_count()} CPUs; load average {one:.1f} (1 min), {five:.1f} (5 min)", flush=True)
    tally: dict[str, int] = {}
    for run in range(1, args.runs + 1):
        out = base / f"run-{run}"
        hog = None if args.no_hog else start_hog()
        started = time.monotonic()
        try:
            result = subprocess.run([sys.executable, "-m", "sm_locust", "sweep", str(SWEEP), "--out", str(out),
                                     "--yes", "--set", f"name=ranker-scaling-hog-{os.getpid()}-{run}"],
                                    capture_output=True, text=True, timeout=1800, cwd=ROOT)
        finally:
            if hog is not None:
                hog.terminate()
                hog.wait(timeout=10)
        wall = time.monotonic() - started
        try:
            doc = json.loads((out / "sweep.json").read_text())
        except (OSError, ValueError):
            doc = None
        if doc is None or not (out / "sweep.html").exists():  # the sweep did not finish: say why, count it apart
            print(f"  run {run}: no result (exit {result.returncode}): {result.stderr.strip()[-300:]}", flush=True)
            tally["no result"] = tally.get("no result", 0) + 1
            continue
        verdict = classify(doc)
        tally[verdict] = tally.get(verdict, 0) + 1
        rows = "; ".join(describe(c) for c in doc.get("configurations") or [])
        print(f"  run {run}: {verdict}: recommended {(doc.get('recommendation') or {}).get('label')}; {rows}; "
              f"exit {result.returncode}; {wall:.0f} s; load {os.getloadavg()[0]:.1f}", flush=True)
    one, five, _ = os.getloadavg()
    print(f"verdicts: {', '.join(f'{k} {v}' for k, v in sorted(tally.items()))} of {args.runs}; "
          f"load average at the end {one:.1f} (1 min), {five:.1f} (5 min); sweep folders in {base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
