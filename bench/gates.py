"""How often `sm-locust smoke --baseline` fails a run of the same endpoint (A/A) and of one 25 % slower (A/B).

Issue 28's target: 15-s smoke runs against a baseline of the same local endpoint fail at most 1 time
in 10 (A/A); against an endpoint 25 % slower, at least 9 times in 10 (A/B). Each trial, as a CI job
would run it, one after the other on this machine:

1. a 15-s baseline run (`sm-locust run`, 2 users, as smoke's default) against endpoint A;
2. `sm-locust smoke` for 15 s against A with `--baseline` that run (A/A);
3. `sm-locust smoke` for 15 s against B with the same `--baseline` (A/B).

A and B are `sm-locust serve` endpoints (LocalEndpoint). A adds `--latency-ms 40`; the model's own
work and the HTTP round trip come on top of it (about 10 ms on a busy 2-core box), so B is
calibrated to answer 25 % slower than A as a whole: a 5-s calibration run measures A's median m,
and B adds 40 + 0.25 x m ms. The default `--tolerance` (10 %) applies. Printed: one line per run
(exit code, the p95 gate's line), the two failure rates with the median measured p95 change, and
the load average before and after (the machine is shared; figures move with it). Nothing is asserted.

    .venv/bin/python bench/gates.py                 # 10 trials of 15 s (about 10 minutes)
    .venv/bin/python bench/gates.py --trials 3 --seconds 10 --keep /tmp/gates-bench
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
PAYLOAD = ROOT / "sm_locust" / "data" / "ranking_10rows.json"
BASE_LATENCY_MS = 40.0
SLOWER = 1.25


def _env() -> dict:
    env = dict(os.environ)
    env.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_EC2_METADATA_DISABLED": "true", "PYTHONUNBUFFERED": "1"})
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"):
        env.pop(name, None)
    return env


def sm_locust(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sm_locust", *args], capture_output=True, text=True, timeout=timeout,
                          env=_env(), cwd=ROOT)


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f} (1 min), {five:.1f} (5 min)"


def p95_of(folder: Path) -> float | None:
    try:
        return json.loads((folder / "summary.json").read_text())["totals"].get("p95_ms")
    except (OSError, ValueError, KeyError):
        return None


def gate_line(stdout: str, figure: str = "p95") -> str:
    for line in stdout.splitlines():
        if f" {figure} vs baseline " in line:
            return line.split("sm-locust smoke: ", 1)[-1]
    return "(no p95 gate line)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--users", type=int, default=2)
    ap.add_argument("--keep", default=None, help="keep the run folders here")
    args = ap.parse_args(argv)

    from sm_locust.endpoint.server import LocalEndpoint

    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="sm-locust-gates-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    common = ["--endpoint-name", "bench", "--payload", str(PAYLOAD), "-u", str(args.users), "-r", "10",
              "-t", f"{args.seconds}s", "-q"]
    timeout = args.seconds + 120.0
    started = time.monotonic()
    with LocalEndpoint(latency_ms=BASE_LATENCY_MS, log_path=base / "a.log") as a:
        calibration = base / "calibration"
        sm_locust("run", "--endpoint-url", a.url, *common[:-3], "-t", "5s", "-q", "--out", str(calibration),
                  timeout=timeout)
        median = json.loads((calibration / "summary.json").read_text())["totals"]["p50_ms"]
    b_latency = round(BASE_LATENCY_MS + (SLOWER - 1.0) * median, 1)
    print(f"gates bench: {args.trials} trials of {args.seconds}-s runs, {args.users} users; A --latency-ms "
          f"{BASE_LATENCY_MS:g} (median {median:g} ms), B --latency-ms {b_latency:g} (25 % slower than A's median); "
          f"default --tolerance; {os.cpu_count()} CPUs; load average {load()}", flush=True)
    failed = {"A/A": 0, "A/B": 0}
    ratios: dict[str, list[float]] = {"A/A": [], "A/B": []}
    with LocalEndpoint(latency_ms=BASE_LATENCY_MS, log_path=base / "a.log") as a, \
            LocalEndpoint(latency_ms=b_latency, log_path=base / "b.log") as b:
        for trial in range(1, args.trials + 1):
            baseline = base / f"t{trial}-baseline"
            run = sm_locust("run", "--endpoint-url", a.url, *common, "--out", str(baseline), timeout=timeout)
            if run.returncode != 0:
                print(f"  trial {trial}: the baseline run failed: {(run.stderr or run.stdout).strip()[-300:]}")
                return 1
            for label, endpoint in (("A/A", a), ("A/B", b)):
                out = base / f"t{trial}-{label.replace('/', '')}"
                smoke = sm_locust("smoke", "--endpoint-url", endpoint.url, *common, "--out", str(out),
                                  "--baseline", str(baseline), "--junit", str(out / "junit.xml"), timeout=timeout)
                if smoke.returncode not in (0, 1):
                    print(f"  trial {trial} {label}: exit {smoke.returncode}: {(smoke.stderr or smoke.stdout)[-300:]}")
                    return 1
                failed[label] += smoke.returncode == 1
                new, old = p95_of(out), p95_of(baseline)
                if new and old:
                    ratios[label].append(new / old)
                print(f"  trial {trial} {label}: exit {smoke.returncode}; {gate_line(smoke.stdout)}; "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
    for label in ("A/A", "A/B"):
        measured = sorted(ratios[label])
        middle = f"{(measured[len(measured) // 2] - 1) * 100:+.0f} %" if measured else "-"
        print(f"{label}: failed {failed[label]} of {args.trials} "
              f"(target {'<= 1' if label == 'A/A' else '>= 9'} in 10); median measured p95 change {middle}")
    print(f"wall {time.monotonic() - started:.0f} s; load average at the end {load()}; run folders in {base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
