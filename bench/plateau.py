"""Benchmark the plateau search against local endpoints of known capacity, with default options.

Each profile starts `sm-locust serve` with `max_concurrency` slots of `service_time_ms` (nominal
capacity C = slots / service time, knee at about C x round-trip users), then:

1. measures the endpoint's EFFECTIVE capacity on this machine from the endpoint's own counter
   (`/_sm_locust/stats` `successes`, sampled every 0.5 s) while an overload of closed-loop users
   (2 x the slots) runs for `--reference-s` seconds: the rate over the held part, first 3 s and
   last second left out. The slot also holds the model's own compute and the endpoint shares the
   CPU with the load generator, so the effective capacity sits a few % under the nominal one; it
   is the "true" figure the search should find. Nothing here comes from the client's summary;
2. runs `sm-locust run --shape plateau` exactly as a user would, with DEFAULT options (no step,
   duration or user settings; `--search-mode rate` is added for the rate mode only);
3. prints effective vs found capacity (`plateau.capacity_rps`), the knee, steps, wall time to the
   verdict (the whole `sm-locust run`, Locust start-up included) and the verdict.

Targets (issue 11): capacity within +-5 % of the effective capacity, verdict within 3 minutes.
Figures are printed, not asserted. The 400 req/s profile runs twice: with one Locust process, as a
user would on the default (fast) transport, and with `--processes 2` (a master and two workers, the
distributed case; on 2 cores the endpoint, the master and two workers then share the CPU: read that
row with this in mind). Endpoints faster than ~450 req/s need the endpoint on a core of its own:
`bench/repro.py --hogs 0 --reference RPS` pins it (docs/plateau.md).

    .venv/bin/python bench/plateau.py            # full: 50, 150, 400 req/s, users mode
    .venv/bin/python bench/plateau.py --modes users,rate
    .venv/bin/python bench/plateau.py --quick    # CI smoke: one 100 req/s profile
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAYLOAD = ROOT / "sm_locust" / "data" / "ranking_10rows.json"
VERDICT_BUDGET_S = 180.0  # the goal: a verdict within 3 minutes
REFERENCE_WARMUP_S = 3.0  # the endpoint counter's first seconds under the overload are left out


@dataclass(frozen=True)
class Profile:
    name: str
    slots: int
    service_ms: float
    processes: int | None = None

    @property
    def label(self) -> str:
        """The profile's name, with its process count when it runs distributed."""
        return f"{self.name} (--processes {self.processes})" if self.processes else self.name

    @property
    def nominal(self) -> float:
        return self.slots / (self.service_ms / 1000.0)


PROFILES = [
    Profile("50 req/s (2 x 40 ms)", 2, 40.0),
    Profile("150 req/s (6 x 40 ms)", 6, 40.0),
    Profile("400 req/s (40 x 100 ms)", 40, 100.0),
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


def _command(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "sm_locust", *args]


class CounterSampler:
    """Samples the endpoint's own `successes` counter every `period_s` in a thread."""

    def __init__(self, endpoint, period_s: float = 0.5):
        self.endpoint = endpoint
        self.period_s = period_s
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append((time.monotonic(), float(self.endpoint.stats()["successes"])))
            except OSError:
                pass
            self._stop.wait(self.period_s)

    def __enter__(self) -> CounterSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def held_rate(self, warmup_s: float = REFERENCE_WARMUP_S) -> float | None:
        """Successes/s from `warmup_s` after the first success to one second before the last one."""
        start = next((i for i, (_, n) in enumerate(self.samples) if n > self.samples[0][1]), None)
        if start is None:
            return None
        last = self.samples[-1][1]
        end = next(i for i, (_, n) in enumerate(self.samples) if n == last)  # the counter's last increase
        t0 = self.samples[start][0] + warmup_s
        t1 = self.samples[end][0] - 1.0
        window = [(t, n) for t, n in self.samples[start:end + 1] if t0 <= t <= t1]
        if len(window) < 2 or window[-1][0] - window[0][0] < 2.0:
            return None
        return (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0])


def effective_capacity(endpoint, profile: Profile, seconds: float, out: Path) -> float | None:
    """Successes per second the endpoint itself counted under an overload of closed-loop users."""
    users = max(4, 2 * profile.slots)  # well past the knee, without starving a 2-core box
    args = ["run", "--endpoint-name", "bench", "--endpoint-url", endpoint.url, "--payload", str(PAYLOAD),
            "-u", str(users), "-r", str(min(100, users)), "-t", f"{seconds:g}s", "--out", str(out), "-q"]
    if profile.processes:
        args += ["--processes", str(profile.processes)]
    with CounterSampler(endpoint) as sampler:
        subprocess.run(_command(args), capture_output=True, text=True, timeout=seconds + 90, env=_env(), cwd=ROOT)
    return sampler.held_rate()


def search(endpoint, profile: Profile, mode: str, out: Path, timeout_s: float) -> dict:
    """`sm-locust run --shape plateau` with default options; the verdict from summary.json."""
    import json

    args = ["run", "--endpoint-name", "bench", "--endpoint-url", endpoint.url, "--payload", str(PAYLOAD),
            "--shape", "plateau", "--out", str(out), "-q"]
    if mode == "rate":
        args += ["--search-mode", "rate"]
    if profile.processes:
        args += ["--processes", str(profile.processes)]
    started = time.monotonic()
    try:
        result = subprocess.run(_command(args), capture_output=True, text=True, timeout=timeout_s, env=_env(), cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"no verdict within {timeout_s:g} s", "wall_s": time.monotonic() - started}
    wall = time.monotonic() - started
    if result.returncode != 0:
        return {"error": (result.stderr or result.stdout).strip().splitlines()[-1:], "wall_s": wall}
    plateau = json.loads((out / "summary.json").read_text()).get("plateau") or {}
    return {"wall_s": wall, **{k: plateau.get(k) for k in ("capacity_rps", "rps", "users", "rate", "steps",
                                                           "reached", "model_knee_users")},
            "text": plateau.get("text", "(no verdict)")}


def _row(profile: Profile, mode: str, effective: float | None, found: dict) -> str:
    capacity = found.get("capacity_rps")
    err = f"{(capacity / effective - 1) * 100:+.1f} %" if capacity and effective else "-"
    if found.get("rps") is None:
        knee = "-"
    elif mode == "users":
        knee = f"{found['users']} users ({found['rps']:.1f} req/s)"
    else:
        knee = f"{found['rate']:g} req/s offered ({found['rps']:.1f} req/s)"
    eff = "-" if effective is None else f"{effective:.1f}"
    cap = "-" if capacity is None else f"{capacity:.1f}"
    return (f"| {profile.label} | {mode} | {profile.nominal:.0f} | {eff} | {cap} | {err} | {knee} "
            f"| {found.get('steps', '-')} | {found['wall_s']:.0f} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="CI smoke: one 100 req/s profile")
    ap.add_argument("--reference-s", type=float, default=None,
                    help="effective-capacity overload run (default 20 s; quick 10)")
    ap.add_argument("--modes", default="users", help="comma list of users,rate (default users: the default options)")
    ap.add_argument("--timeout-s", type=float, default=400.0, help="give up on a search after this long")
    ap.add_argument("--keep", default=None, help="keep the run folders here")
    ap.add_argument("--only", default=None, help="run the profiles whose name contains this text (e.g. 'processes 2')")
    args = ap.parse_args(argv)

    from sm_locust.endpoint.server import LocalEndpoint

    profiles = QUICK if args.quick else PROFILES
    if args.only:
        profiles = [p for p in profiles if args.only in p.label]
    reference_s = args.reference_s or (10.0 if args.quick else 20.0)
    modes = args.modes.split(",")
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="sm-locust-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    rows = []
    print(f"plateau bench: {len(profiles)} profile(s), modes {', '.join(modes)}, default search options, "
          f"{os.cpu_count()} CPUs (shared: figures are noisy)", flush=True)
    for index, profile in enumerate(profiles):
        with LocalEndpoint(max_concurrency=profile.slots, service_time_ms=profile.service_ms,
                           log_path=base / f"endpoint{index}.log") as endpoint:
            effective = effective_capacity(endpoint, profile, reference_s, base / f"p{index}-reference")
            print(f"  {profile.name}: effective capacity {effective or float('nan'):.1f} req/s "
                  f"(endpoint counter; nominal {profile.nominal:.0f}); load average {os.getloadavg()[0]:.1f}",
                  flush=True)
            for mode in modes:
                found = search(endpoint, profile, mode, base / f"p{index}-{mode}", args.timeout_s)
                rows.append((profile, mode, effective, found))
                late = "" if found["wall_s"] <= VERDICT_BUDGET_S else f" (over the {VERDICT_BUDGET_S:g}-s goal)"
                print(f"    {mode}: {found.get('text') or found.get('error')} ({found['wall_s']:.0f} s{late}; "
                      f"load average {os.getloadavg()[0]:.1f})", flush=True)

    print()
    print("| profile | mode | nominal req/s | effective req/s (endpoint counter) | capacity found req/s "
          "| error vs effective | knee | steps | wall s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(_row(*row))
    print(f"\nrun folders: {base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
