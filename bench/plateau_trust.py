"""Can the plateau's figures be trusted? Coverage of its interval, and its verdict with a CPU hog (issue 28).

Runs `sm-locust run --shape plateau` with DEFAULT search options N times against a local endpoint
of known capacity (`--slots` x `--service-ms`: nominal capacity = slots / service time) and prints,
per run and in total:

1. **coverage**: whether summary.json's `plateau.capacity_ci95` (the 95 % interval of the
   capacity) holds the endpoint's TRUE capacity, read from the endpoint's own counters
   (`/_sm_locust/stats`), never from the client's summary, two ways:
   - **at the capacity step**: what the endpoint counted (`successes`) over that step's steady
     window, when it was saturated then (requests waited for a concurrency slot: its
     ModelLatency, which holds that wait, exceeds the service time by > 10 %): a saturated
     endpoint serves its capacity, so this is its capacity at that moment, on this machine;
   - **an overload reference**: just before AND just after each search, 2 x the slots closed-loop
     users for `--reference-s` seconds, the rate the endpoint counted over the held part (as
     bench/plateau.py measures it); the mean of the two, and their difference (`drift`: how much
     the shared machine itself moved meanwhile; a drift larger than the interval makes this truth
     as uncertain as the figure it judges);
2. **the verdict with a CPU hog** (`--hog`): one `python -c 'while 1: pass'` keeps a core busy
   for the whole run (references included). Each run is RIGHT (verdict ok, the endpoint saturated
   at the capacity step and the interval holds what it counted), INCONCLUSIVE (summary.json
   `verdict.status`, with its reason), or WRONG (verdict ok, but the endpoint was not saturated,
   i.e. the client held it back, or the interval misses its count). Never-wrong is the goal.

The machine is shared: each run prints the load average (1 min) beside its figures.

    .venv/bin/python bench/plateau_trust.py --runs 10            # coverage, quiet(er) machine
    .venv/bin/python bench/plateau_trust.py --runs 10 --hog      # the verdict with one core kept busy
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_plateau", Path(__file__).with_name("plateau.py"))
assert _spec is not None and _spec.loader is not None
bench_plateau = importlib.util.module_from_spec(_spec)
sys.modules["bench_plateau"] = bench_plateau  # dataclasses look their module up there
_spec.loader.exec_module(bench_plateau)  # the reference overload and the run environment: one home (bench/plateau.py)


COUNTERS = ("successes", "invocations", "model_latency_us_sum")


class EpochCounter:
    """The endpoint's counters (`COUNTERS`) sampled every `period_s` with epoch timestamps (summary.json's clock)."""

    def __init__(self, endpoint, period_s: float = 0.25, field: str = "successes"):
        self.endpoint, self.period_s, self.field = endpoint, period_s, field
        self.samples: list[tuple[float, float]] = []
        self.all: list[tuple[float, dict[str, float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                stats = self.endpoint.stats()
                now = time.time()
                self.all.append((now, {k: float(stats[k]) for k in COUNTERS}))
                self.samples.append((now, float(stats[self.field])))
            except OSError:
                pass
            self._stop.wait(self.period_s)

    def of(self, field: str) -> EpochCounter:
        """The same samples read as another counter."""
        view = EpochCounter(self.endpoint, self.period_s, field)
        view.samples = [(t, values[field]) for t, values in self.all]
        return view

    def __enter__(self) -> EpochCounter:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def rate(self, start: float, end: float) -> float | None:
        """Successes/s between `start` and `end` (epoch s), the counter interpolated at both ends."""
        def at(t: float) -> float | None:
            before = [(ts, n) for ts, n in self.samples if ts <= t]
            after = [(ts, n) for ts, n in self.samples if ts >= t]
            if not before or not after:
                return None
            (t0, n0), (t1, n1) = before[-1], after[0]
            return n0 if t1 == t0 else n0 + (n1 - n0) * (t - t0) / (t1 - t0)

        a, b = at(start), at(end)
        return None if a is None or b is None or end <= start else (b - a) / (end - start)


@dataclass
class Outcome:
    run: int
    truth: float | None  # the endpoint's effective capacity (its counter under an overload, before and after)
    drift: float | None  # after - before
    capacity: float | None
    ci95: list[float] | None
    served: float | None  # the endpoint's counter over the capacity step's steady window
    slot_wait_ms: float | None  # mean wait for a concurrency slot over that window (ModelLatency - service time)
    status: str  # summary.json verdict: ok | inconclusive | error
    reason: str | None
    load: float
    step: dict | None
    text: str
    service_ms: float = 0.0

    @property
    def covered(self) -> bool | None:
        """The interval holds the overload reference (the mean of before and after)."""
        if self.truth is None or self.ci95 is None:
            return None
        return self.ci95[0] <= self.truth <= self.ci95[1]

    @property
    def saturated(self) -> bool | None:
        """Requests waited for a slot during the capacity step (> 10 % of the service time on average):
        the endpoint ran at its capacity, so what it counted then IS its capacity at that moment."""
        return None if self.slot_wait_ms is None else self.slot_wait_ms > 0.1 * self.service_ms

    @property
    def covers_served(self) -> bool | None:
        """The interval holds what the endpoint itself counted over the capacity step's window."""
        if self.served is None or self.ci95 is None:
            return None
        return self.ci95[0] <= self.served <= self.ci95[1]

    @property
    def judged(self) -> str:
        """right: verdict ok, the endpoint saturated during the capacity step and the interval holds what it
        counted then; WRONG: verdict ok but the endpoint was not saturated (the client held it back) or the
        interval misses its count; INCONCLUSIVE: what the run said."""
        if self.status == "inconclusive":
            return "INCONCLUSIVE"
        if self.status != "ok" or self.saturated is None or self.covers_served is None:
            return "error"
        return "right" if self.saturated and self.covers_served else "WRONG"


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def plateau_run(endpoint, out: Path, timeout_s: float) -> tuple[dict | None, str]:
    args = ["run", "--endpoint-name", "bench", "--endpoint-url", endpoint.url, "--payload",
            str(bench_plateau.PAYLOAD), "--shape", "plateau", "--out", str(out), "-q"]
    try:
        result = subprocess.run(bench_plateau._command(args), capture_output=True, text=True, timeout=timeout_s,
                                env=bench_plateau._env(), cwd=ROOT)
    except subprocess.TimeoutExpired:
        return None, f"no verdict within {timeout_s:g} s"
    if not (out / "summary.json").is_file():
        return None, (result.stderr or result.stdout).strip()[-300:]
    return json.loads((out / "summary.json").read_text()), result.stdout


def one_run(index: int, endpoint, profile, base: Path, reference_s: float, timeout_s: float) -> Outcome:
    before = bench_plateau.effective_capacity(endpoint, profile, reference_s, base / f"run{index}-before")
    with EpochCounter(endpoint) as counter:
        summary, said = plateau_run(endpoint, base / f"run{index}", timeout_s)
    load = os.getloadavg()[0]
    after = bench_plateau.effective_capacity(endpoint, profile, reference_s, base / f"run{index}-after")
    truth = (before + after) / 2 if before is not None and after is not None else before or after
    drift = after - before if before is not None and after is not None else None
    if summary is None:
        return Outcome(index, truth, drift, None, None, None, None, "error", said, load, None, said,
                       profile.service_ms)
    plateau = summary.get("plateau") or {}
    verdict = summary.get("verdict") or {}
    steps = summary.get("steps") or []
    index_of = plateau.get("capacity_step")
    step = steps[index_of] if isinstance(index_of, int) and index_of < len(steps) else None
    served = slot_wait = None
    if step is not None:
        end = datetime.fromisoformat(step["end"]).timestamp()
        start = end - step["steady_s"]
        served = counter.rate(start, end)
        invoked = counter.of("invocations").rate(start, end)
        latency = counter.of("model_latency_us_sum").rate(start, end)
        if invoked and latency is not None:  # ModelLatency holds the wait for a slot: a queue means saturated
            slot_wait = latency / invoked / 1000.0 - profile.service_ms
    return Outcome(index, truth, drift, plateau.get("capacity_rps"), plateau.get("capacity_ci95"), served, slot_wait,
                   verdict.get("status", "error"), verdict.get("reason"), load, step, plateau.get("text", ""),
                   profile.service_ms)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--hog", action="store_true", help="keep one core busy (python -c 'while 1: pass') throughout")
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--service-ms", type=float, default=40.0)
    ap.add_argument("--reference-s", type=float, default=15.0, help="the overload that measures the truth")
    ap.add_argument("--timeout-s", type=float, default=400.0)
    ap.add_argument("--keep", default=None, help="keep the run folders here")
    args = ap.parse_args(argv)

    from sm_locust.endpoint.server import LocalEndpoint  # lazy: after argument parsing

    profile = bench_plateau.Profile(f"{args.slots} x {args.service_ms:g} ms", args.slots, args.service_ms)
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="sm-locust-trust-"))
    base.mkdir(parents=True, exist_ok=True)
    hog = subprocess.Popen([sys.executable, "-c", "while 1: pass"]) if args.hog else None
    print(f"plateau trust bench: {args.runs} runs, {profile.name} (nominal {profile.nominal:.0f} req/s), default "
          f"search options, {'ONE CORE KEPT BUSY (CPU hog), ' if hog else ''}{os.cpu_count()} CPUs shared; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    outcomes: list[Outcome] = []
    try:
        with LocalEndpoint(max_concurrency=args.slots, service_time_ms=args.service_ms,
                           log_path=base / "endpoint.log") as endpoint:
            for i in range(1, args.runs + 1):
                o = one_run(i, endpoint, profile, base, args.reference_s, args.timeout_s)
                outcomes.append(o)
                step = o.step or {}
                print(f"  run {i}: capacity {o.capacity} req/s, ci95 {o.ci95}; the endpoint counted "
                      f"{_f(o.served)} req/s over that step (slot wait {_f(o.slot_wait_ms)} ms); overload reference "
                      f"{_f(o.truth)} req/s (drift {_f(o.drift)}); client CPU {step.get('client_cpu_pct')} %, waited "
                      f"{step.get('client_wait_pct')} %; verdict {o.status}{': ' + o.reason if o.reason else ''} -> "
                      f"{o.judged}; load average {o.load:.1f}", flush=True)
    finally:
        if hog is not None:
            hog.terminate()
            hog.wait(timeout=5)
    print()
    print("| run | capacity req/s | 95 % interval | endpoint counted over the step | slot wait ms | holds it "
          "| overload reference (drift) | holds it | client CPU % | waited % | verdict | judged | load avg |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for o in outcomes:
        step = o.step or {}
        ci = "-" if o.ci95 is None else f"[{o.ci95[0]:.1f}, {o.ci95[1]:.1f}]"
        print(f"| {o.run} | {o.capacity} | {ci} | {_f(o.served)} | {_f(o.slot_wait_ms)} | {o.covers_served} "
              f"| {_f(o.truth)} ({_f(o.drift)}) | {o.covered} | {step.get('client_cpu_pct')} "
              f"| {step.get('client_wait_pct')} | {o.status} | {o.judged} | {o.load:.1f} |")
    served = sum(1 for o in outcomes if o.covers_served and o.saturated)
    reference = sum(1 for o in outcomes if o.covered)
    counts = {k: sum(1 for o in outcomes if o.judged == k) for k in ("right", "INCONCLUSIVE", "WRONG", "error")}
    print(f"\ncoverage: the interval holds the endpoint's own count over the (saturated) capacity step in {served} of "
          f"{len(outcomes)} runs, the overload reference in {reference} of {len(outcomes)}; verdicts: "
          + ", ".join(f"{k} {v}" for k, v in counts.items()) + f"; run folders: {base}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
