"""The serverless tests' figures from what a configuration's runs recorded (pure: fed parsed files).

One run holds the stability test and the concurrency tests as consecutive phases (`plan.py`); its
seconds are cut into phases here, a changed user count starting a phase at the first second showing
it. A throttle is answered faster than any success, so the successes' histogram is the phase's minus
its `throttled` fastest entries (`success_hist`). Concurrency phases drop their first 20 % (at least
1 s). Stability splits cold from warm at a threshold (`COLD_FACTOR` without a cold-start test); the
warm mean is what serverless bills. Intervals are 95 % (`measure/uncertainty.py`), null for a window
too short; cold-start percentiles are exact, nearest-rank (docs/serverless.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from sm_locust.measure.steady import histogram_percentile, merge_histograms
from sm_locust.measure.timeline import Second
from sm_locust.measure.uncertainty import order_statistic_ci, percentile_cis, rate_ci
from sm_locust.record.model import JsonObject, Totals

WARMUP_SHARE = 0.2  # concurrency phases: the first 20 % (at least MIN_WARMUP_S) is ramp and cold starts
MIN_WARMUP_S = 1.0
COLD_FACTOR = 4.0  # without a cold-start test: slower than 4 x the stability median is a cold start
ALIGN_SLACK_S = 2.0


@dataclass(frozen=True)
class Phase:
    name: str  # "stability" or "concurrency"
    users: int
    duration_s: float
    multiplier: float | None = None  # concurrency phases


def _begin(second: Second) -> float:
    return second.t - (second.interval or 1.0)


def phase_bounds(seconds: Sequence[Second], phases: Sequence[Phase]) -> list[tuple[float, float]]:
    """(start, end) epoch seconds of each phase in the run's timeline."""
    if not seconds:
        return [(0.0, 0.0) for _ in phases]
    expected = _begin(seconds[0])
    bounds = []
    for k, phase in enumerate(phases):
        start = expected
        if k > 0 and phase.users != phases[k - 1].users:
            for s in seconds:
                if _begin(s) >= expected - ALIGN_SLACK_S and s.users == phase.users:
                    start = _begin(s)
                    break
        bounds.append((start, start + phase.duration_s))
        expected = start + phase.duration_s
    # a phase found a second late would otherwise reach into the next one found on time (CI counted
    # the first throttles of 4 callers as 3.5 % throttled with 2): it ends where the next begins
    return [(start, min(end, bounds[k + 1][0]) if k + 1 < len(bounds) else end)
            for k, (start, end) in enumerate(bounds)]


def in_window(seconds: Iterable[Second], start: float, end: float) -> list[Second]:
    """Seconds whose middle falls in [start, end)."""
    out = []
    for s in seconds:
        middle = s.t - (s.interval or 1.0) / 2.0
        if start <= middle < end:
            out.append(s)
    return out


def success_hist(hist: Mapping[int, int], throttled: int) -> dict[int, int]:
    """The histogram without its `throttled` fastest entries (throttles are answered fastest)."""
    left = dict(hist)
    drop = max(0, int(throttled))
    for bucket in sorted(left):
        if drop <= 0:
            break
        take = min(left[bucket], drop)
        left[bucket] -= take
        drop -= take
    return {b: n for b, n in left.items() if n > 0}


def hist_mean(hist: Mapping[int, int]) -> float | None:
    total = sum(hist.values())
    return sum(b * n for b, n in hist.items()) / total if total else None


def nearest_rank(values: Sequence[float], pct: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(pct / 100.0 * len(ordered)) - 1)]


@dataclass
class StabilityFigures:
    requests: int = 0
    failures: int = 0
    p50_ms: float | None = None  # every request, cold starts included
    p95_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None
    cold_requests: int = 0  # above the threshold
    threshold_ms: float | None = None
    warm_p50_ms: float | None = None  # the rest
    warm_p95_ms: float | None = None
    warm_p99_ms: float | None = None
    warm_mean_ms: float | None = None
    warm_p50_ms_ci95: list[float] | None = None  # 95 % intervals (module docstring)
    warm_p95_ms_ci95: list[float] | None = None
    warm_p99_ms_ci95: list[float] | None = None
    warm_mean_ms_ci95: list[float] | None = None
    source: str = "stability"  # or "concurrency x0.5": no stability test ran (`load_figures`)
    hist: dict[int, int] = field(default_factory=dict, repr=False)

    def as_dict(self) -> dict[str, object]:
        out = asdict(self)
        out.pop("hist")
        return out


@dataclass
class ConcurrencyFigures:
    multiplier: float
    users: int
    seconds: float = 0.0  # steady window length
    requests: int = 0
    throttled: int = 0
    throttle_rate: float | None = None
    goodput_rps: float | None = None
    goodput_rps_ci95: list[float] | None = None
    p50_ms: float | None = None  # successful invocations
    p95_ms: float | None = None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class ColdStartFigures:
    samples_ms: list[float] = field(default_factory=list)  # successful first requests after an idle gap
    failures: dict[str, int] = field(default_factory=dict)
    p50_ms: float | None = None
    p99_ms: float | None = None
    mean_ms: float | None = None
    p50_ms_ci95: list[float] | None = None
    p99_ms_ci95: list[float] | None = None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def throttle_share(totals: Totals | JsonObject) -> float:
    """The share of the run's failures that were ThrottlingException (1 when it failed nothing)."""
    record = Totals.of(totals)
    failures = int(record.failures or 0)
    if not failures:
        return 1.0
    return min(1.0, int((record.errors or {}).get("ThrottlingException", 0)) / failures)


def stability(window: Sequence[Second], throttle_part: float = 1.0,
              cold_p50_ms: float | None = None) -> StabilityFigures:
    f = StabilityFigures()
    f.requests = sum(s.requests for s in window)
    f.failures = sum(s.failures for s in window)
    hist = success_hist(merge_histograms(s.hist for s in window), round(f.failures * throttle_part))
    f.hist = hist
    if not hist:
        return f
    p50 = histogram_percentile(hist, 50)
    f.p50_ms, f.p95_ms, f.p99_ms = p50, histogram_percentile(hist, 95), histogram_percentile(hist, 99)
    f.max_ms = float(max(hist))
    if p50 is None:  # not reached: the histogram holds a request
        return f
    f.threshold_ms = math.sqrt(p50 * cold_p50_ms) if cold_p50_ms and cold_p50_ms > p50 else COLD_FACTOR * p50
    warm = {b: n for b, n in hist.items() if b <= f.threshold_ms}
    f.cold_requests = sum(n for b, n in hist.items() if b > f.threshold_ms)
    if warm:
        f.warm_p50_ms, f.warm_p95_ms, f.warm_p99_ms = (histogram_percentile(warm, p) for p in (50, 95, 99))
        f.warm_mean_ms = hist_mean(warm)
        warm_intervals(f, window, throttle_part)
    return f


def warm_intervals(f: StabilityFigures, window: Sequence[Second], throttle_part: float) -> None:
    """The warm figures' 95 % intervals, from the window's seconds (each second's successes below the
    cold threshold): percentiles by block bootstrap, the mean as a ratio by batch means."""
    threshold = f.threshold_ms if f.threshold_ms is not None else math.inf
    hists, durations, sums, counts = [], [], [], []
    for s in window:
        own = success_hist(s.hist, round(s.failures * throttle_part))
        warm = {b: n for b, n in own.items() if b <= threshold}
        hists.append(warm)
        durations.append(s.interval or 1.0)
        sums.append(float(sum(b * n for b, n in warm.items())))
        counts.append(float(sum(warm.values())))
    cis = percentile_cis(hists, (50.0, 95.0, 99.0), intervals=durations)
    f.warm_p50_ms_ci95, f.warm_p95_ms_ci95, f.warm_p99_ms_ci95 = (cis[p].as_list(1) for p in (50.0, 95.0, 99.0))
    f.warm_mean_ms_ci95 = rate_ci(sums, counts).as_list(2)


def concurrency(window: Sequence[Second], phase: Phase, throttle_part: float = 1.0) -> ConcurrencyFigures:
    f = ConcurrencyFigures(multiplier=float(phase.multiplier or 0.0), users=phase.users)
    if not window:
        return f
    f.seconds = sum(s.interval or 1.0 for s in window)
    f.requests = sum(s.requests for s in window)
    failures = sum(s.failures for s in window)
    f.throttled = round(failures * throttle_part)
    f.throttle_rate = f.throttled / f.requests if f.requests else None
    f.goodput_rps = (f.requests - failures) / f.seconds if f.seconds else None
    served = [s.requests - s.failures for s in window]
    f.goodput_rps_ci95 = rate_ci(served, [s.interval or 1.0 for s in window]).as_list(2)
    hist = success_hist(merge_histograms(s.hist for s in window), f.throttled)
    if hist:
        f.p50_ms, f.p95_ms = histogram_percentile(hist, 50), histogram_percentile(hist, 95)
    return f


def steady(window: Sequence[Second], start: float, end: float) -> list[Second]:
    """A concurrency phase's window without its warm-up."""
    warmup = max(MIN_WARMUP_S, WARMUP_SHARE * (end - start))
    return in_window(window, start + warmup, end)


def phase_samples(phase_s: float) -> tuple[int, int]:
    """(stability, concurrency): how many one-second samples a test phase of `phase_s` seconds keeps,
    the stability test's whole phase and a concurrency phase's `steady` window (for plans)."""
    whole = [Second(t=float(i + 1), users=1, spawning=False, requests=0, failures=0)
             for i in range(max(0, int(phase_s + 1e-9)))]
    start = _begin(whole[0]) if whole else 0.0
    return len(in_window(whole, start, start + phase_s)), len(steady(whole, start, start + phase_s))


def cold_starts(samples: Iterable[Mapping[str, Any]]) -> ColdStartFigures:
    """`samples`: {"ms": latency, "code": "ok" or the error code} per first request after a gap."""
    f = ColdStartFigures()
    for s in samples:
        if s.get("code") == "ok":
            f.samples_ms.append(round(float(s["ms"]), 1))
        else:
            f.failures[str(s.get("code"))] = f.failures.get(str(s.get("code")), 0) + 1
    if f.samples_ms:
        f.p50_ms, f.p99_ms = nearest_rank(f.samples_ms, 50), nearest_rank(f.samples_ms, 99)
        f.p50_ms_ci95 = order_statistic_ci(f.samples_ms, 50).as_list(1)
        f.p99_ms_ci95 = order_statistic_ci(f.samples_ms, 99).as_list(1)
        f.mean_ms = sum(f.samples_ms) / len(f.samples_ms)
    return f


@dataclass
class LoadFigures:
    stability: StabilityFigures | None
    concurrency: list[ConcurrencyFigures]
    stability_window: tuple[float, float] | None = None  # epoch seconds


def load_figures(seconds: Sequence[Second], phases: Sequence[Phase], totals: Totals | JsonObject,
                 cold_p50_ms: float | None = None) -> LoadFigures:
    """The stability and concurrency figures of one load run (its timeline and summary totals)."""
    part = throttle_share(totals)
    bounds = phase_bounds(seconds, phases)
    figures = LoadFigures(None, [])
    lightest: tuple[Phase, list[Second], tuple[float, float]] | None = None
    for phase, (start, end) in zip(phases, bounds, strict=True):
        window = in_window(seconds, start, end)
        # a second sampled with another user count holds the change of phase: it is neither's
        window = [s for s in window if s.users == phase.users] or window
        if phase.name == "stability":
            figures.stability = stability(window, part, cold_p50_ms)
            figures.stability_window = (start, end)
        else:
            calm = steady(window, start, end)
            figures.concurrency.append(concurrency(calm, phase, part))
            if lightest is None or (phase.multiplier or 0.0) < (lightest[0].multiplier or 0.0):
                lightest = (phase, calm, (start, end))
    if figures.stability is None and lightest is not None:
        # No stability test: the warm latency and the billed duration come from the lightest concurrency
        # phase's successful requests (was: "no configuration meets the objective", no latency, no cost).
        phase, calm, span = lightest
        figures.stability = stability(calm, part, cold_p50_ms)
        figures.stability.source = f"concurrency x{phase.multiplier:g}"
        figures.stability_window = span
    return figures
