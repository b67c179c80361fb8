"""Benchmark the plateau search against local endpoints of known capacity.

Each profile starts `sm-locust serve` with `max_concurrency` slots of `service_time_ms` (nominal
capacity C = slots / service time, knee at about C x round-trip users), then:

1. measures the endpoint's EFFECTIVE capacity on this machine: an overload of closed-loop users
   for `--reference-s` seconds, counted by the endpoint itself (`/_sm_locust/stats`). The slot also
   holds the model's own compute and the endpoint shares the CPU with the load generator, so the
   effective capacity sits a few % under the nominal one; it is the "true" figure the search
   should find;
2. runs `sm-locust run --shape plateau` exactly as a user would (users mode, and with `--rate`
   also `--search-mode rate`), capped at `--max-duration` (default 180 s);
3. prints true vs found capacity, error %, steps used, wall time to the verdict, and the verdict.

Targets: found within +-5 % of the effective capacity in <= 3 minutes per profile. Figures are
printed, not asserted. One boto3 Locust process tops out near 450 req/s on a 2-core machine
(docs/facts.md), so the 400 req/s profile runs Locust with `--processes 2`; on 2 cores the endpoint,
the master and two workers then share the CPU: read that row with this in mind.

    /work/venv/bin/python bench/plateau.py            # full: 50, 150, 400 req/s; users and rate mode
    /work/venv/bin/python bench/plateau.py --quick    # CI smoke: one small profile, short steps
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAYLOAD = ROOT / "sm_locust" / "data" / "ranking_10rows.json"


@dataclass(frozen=True)
class Profile:
    name: str
    slots: int
    service_ms: float
    processes: int | None = None

    @property
    def nominal(self) -> float:
        return self.slots / (self.service_ms / 1000.0)


PROFILES = [
    Profile("50 req/s (2 x 40 ms)", 2, 40.0),
    Profile("150 req/s (6 x 40 ms)", 6, 40.0),
    Profile("400 req/s (40 x 100 ms)", 40, 100.0, processes=2),
]
QUICK = [Profile("100 req/s (2 x 20 ms)", 2, 20.0)]


def _env() -> dict:
    env = dict(os.environ)
    env.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_EC2_METADATA_DISABLED": "true", "PYTHONUNBUFFERED": "1"})
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"):
        env.pop(name, None)
    return env


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sm_locust", *args], capture_output=True, text=True,
                          timeout=timeout, env=_env(), cwd=ROOT)


def reference_capacity(endpoint, profile: Profile, seconds: float, out: Path) -> float:
    """Requests per second the endpoint itself completed under an overload of closed-loop users."""
    users = max(4, -(-profile.slots * 3 // 2))  # 1.5 x the knee: saturated, without starving a 2-core box
    before = endpoint.stats()
    started = time.time()
    args = ["run", "--endpoint-name", "bench", "--endpoint-url", endpoint.url, "--payload", str(PAYLOAD),
            "-u", str(users), "-r", str(min(100, users)), "-t", f"{seconds:g}s", "--out", str(out), "-q"]
    if profile.processes:
        args += ["--processes", str(profile.processes)]
    _run(args, timeout=seconds + 60)
    after = endpoint.stats()
    # The endpoint also counted the ramp-up; the run's own summary gives the held second range.
    summary = json.loads((out / "summary.json").read_text())
    steps = summary.get("steps") or []
    if steps:  # the steady window of the held step, as the client measured it
        return float(steps[-1]["rps"])
    return (after["requests"] - before["requests"]) / max(1e-9, time.time() - started)


def search(endpoint, profile: Profile, mode: str, step_s: float, max_duration: float, out: Path) -> dict:
    args = ["run", "--endpoint-name", "bench", "--endpoint-url", endpoint.url, "--payload", str(PAYLOAD),
            "--shape", "plateau", "--step-seconds", f"{step_s:g}", "--max-duration", f"{max_duration:g}",
            "--out", str(out), "-q"]
    if mode == "rate":
        args += ["--search-mode", "rate", "--start-rps", f"{max(5.0, profile.nominal / 16):g}",
                 "--max-rps", f"{profile.nominal * 4:g}"]
    if profile.processes:
        args += ["--processes", str(profile.processes)]
    started = time.monotonic()
    result = _run(args, timeout=max_duration + 120)
    wall = time.monotonic() - started
    if result.returncode != 0:
        return {"error": (result.stderr or result.stdout).strip().splitlines()[-1:], "wall_s": wall}
    summary = json.loads((out / "summary.json").read_text())
    plateau = summary.get("plateau") or {}
    return {"wall_s": wall, "rps": plateau.get("rps"), "users": plateau.get("users"), "rate": plateau.get("rate"),
            "steps": plateau.get("steps"), "text": plateau.get("text", "(no verdict)"), "reached": plateau.get("reached")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="CI smoke: one 100 req/s profile, 4-s steps, users mode")
    ap.add_argument("--step-seconds", type=float, default=None, help="seconds per search step (default 10; quick 4)")
    ap.add_argument("--max-duration", type=float, default=180.0, help="search budget per profile and mode (s)")
    ap.add_argument("--reference-s", type=float, default=None, help="effective-capacity overload run (default 20 s; quick 8)")
    ap.add_argument("--modes", default=None, help="comma list of users,rate (default both; quick: users)")
    ap.add_argument("--keep", default=None, help="keep the run folders here")
    ap.add_argument("--only", default=None, help="run the profiles whose name contains this text")
    args = ap.parse_args(argv)

    from sm_locust.endpoint.server import LocalEndpoint

    profiles = QUICK if args.quick else PROFILES
    if args.only:
        profiles = [p for p in profiles if args.only in p.name]
    step_s = args.step_seconds or (4.0 if args.quick else 10.0)
    reference_s = args.reference_s or (8.0 if args.quick else 20.0)
    modes = (args.modes or ("users" if args.quick else "users,rate")).split(",")
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="sm-locust-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    rows = []
    print(f"plateau bench: {len(profiles)} profile(s), modes {', '.join(modes)}, {step_s:g}-s steps, "
          f"budget {args.max_duration:g} s, {os.cpu_count()} CPUs (shared: figures are noisy)", flush=True)
    for index, profile in enumerate(profiles):
        with LocalEndpoint(max_concurrency=profile.slots, service_time_ms=profile.service_ms,
                           log_path=base / f"endpoint{index}.log") as endpoint:
            true = reference_capacity(endpoint, profile, reference_s, base / f"p{index}-reference")
            print(f"  {profile.name}: effective capacity {true:.1f} req/s (nominal {profile.nominal:.0f})", flush=True)
            for mode in modes:
                found = search(endpoint, profile, mode, step_s, args.max_duration, base / f"p{index}-{mode}")
                rows.append((profile, mode, true, found))
                print(f"    {mode}: {found.get('text') or found.get('error')} ({found['wall_s']:.0f} s)", flush=True)

    print()
    print("| profile | mode | nominal req/s | effective req/s | found req/s | error vs effective | at | steps | wall s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for profile, mode, true, found in rows:
        rps = found.get("rps")
        err = f"{(rps / true - 1) * 100:+.1f} %" if rps and true else "-"
        at = (f"{found['users']} users" if mode == "users" else f"{found['rate']:g} req/s offered") if rps else "-"
        procs = f" (--processes {profile.processes})" if profile.processes else ""
        print(f"| {profile.name}{procs} | {mode} | {profile.nominal:.0f} | {true:.1f} | {'-' if rps is None else f'{rps:.1f}'} "
              f"| {err} | {at} | {found.get('steps', '-')} | {found['wall_s']:.0f} |")
    print(f"\nrun folders: {base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
