"""Steady-state figures of one load step, computed from the step's own per-second samples.

Only the step's own requests count (Locust's live figures mix in the previous step): warm-up and
ramping seconds are dropped and the figures come from the window's merged histogram. Stable when
each of `STABILITY_WINDOWS` sub-windows is within `STABILITY_TOLERANCE` of their mean (perf_analyzer's
rule); sub-windows under `MIN_SUBWINDOW_S` make the step unstable. Client-bound: CPU at
`CLIENT_CPU_LIMIT_PCT`, CPU plus wait at `CLIENT_BUSY_LIMIT_PCT`, the generator's own delay
(`measure.looplag`: waiting for a CPU far longer than it ran, its loop's lag), an open loop that did
not offer its rate (`undelivered_reason`: the rate of the sends it scheduled, dropped ones included,
wholly under `MIN_OFFERED_RATIO` of the intended rate), or open-loop sends late or under `MIN_ACHIEVED_RATIO`;
drops at the in-flight cap alone never count (a slow endpoint fills the cap). A step with a failure
majority (`FAILURE_MAJORITY`) is never client-bound.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sm_locust.errors import UsageError
from sm_locust.measure.looplag import (
    FIX_WORKERS,
    LoopLag,
    client_affected_reason,
    merge_counts,
    slo_margin_reason,
    starved_reason,
    throttled_reason,
)
from sm_locust.measure.timeline import Second
from sm_locust.measure.uncertainty import UNKNOWN, Interval, percentile_ci, percentile_cis, rate_ci
from sm_locust.measure.workercpu import window_pair
from sm_locust.util.formatting import load_words

DEFAULT_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 95.0, 99.0, 99.9)
DEFAULT_SLO_PERCENTILE = 95.0  # the percentile an SLO applies to unless one is given (--slo-percentile, sweeps, gates)
DEFAULT_WARMUP_FRACTION = 0.2  # drop the first 20 % of a step (new users, cold connections)
DEFAULT_WARMUP_S = 0.0
STABILITY_WINDOWS = 3  # perf_analyzer: 3 measurement windows ...
STABILITY_TOLERANCE = 0.10  # ... each within 10 % of their mean
MIN_SUBWINDOW_S = 3.0  # one Locust worker report period (a local runner's samples are exact per second: 1 s)
CLIENT_CPU_LIMIT_PCT = 90.0
CLIENT_BUSY_LIMIT_PCT = 90.0  # running + waiting for a CPU: the generator always had work it could not finish
MIN_ACHIEVED_RATIO = 0.90
# An open loop's offer under this share of its intended rate is the generator's shortfall: a rate search calls
# a step served from 95 % of its offer completed (plateau.search PLATEAU_TOLERANCE), so less offered alone reads
# as "not served"
MIN_OFFERED_RATIO = 0.95
FAILURE_MAJORITY = 0.5  # more than half the requests failed: the step is its failures (module docstring)

MODE_USERS = "users"
MODE_RATE = "rate"
MODES = (MODE_USERS, MODE_RATE)


def parse_percentile(value: float | int | str) -> float:
    """`95`, `"95"`, `"p95"`, `"P99.9"` -> percent in (0, 100); anything else is a UsageError."""
    text = str(value).strip()
    number = text[1:] if text[:1] in ("p", "P") else text
    try:
        pct = float(number)
    except ValueError:
        raise UsageError(f"percentile {value!r} is not a number; write it like 95, p95 or p99.9") from None
    if not 0.0 < pct < 100.0:
        raise UsageError(f"percentile {value!r} is out of range; it must be between 0 and 100 (exclusive), e.g. p95")
    return pct


def percentile_label(pct: float) -> str:
    """95.0 -> 'p95', 99.9 -> 'p99.9'."""
    return f"p{pct:g}"


def histogram_percentile(hist: Mapping[int, int], pct: float) -> float | None:
    """Percentile (percent) of a Locust-bucketed histogram, by Locust's own rule, or None if empty.

    Same rule as `locust.stats.calculate_response_time_percentile`, so the numbers match Locust's
    reports for the same requests: walk buckets from the slowest down until the requests left
    are no more than `int(total * pct / 100)`.
    """
    total = sum(hist.values())
    if total <= 0:
        return None
    wanted = int(total * pct / 100.0)
    processed = 0
    for bucket in sorted(hist, reverse=True):
        processed += hist[bucket]
        if total - processed <= wanted:
            return float(bucket)
    return float(min(hist))


def merge_histograms(hists: Iterable[Mapping[int, int]]) -> dict[int, int]:
    merged: dict[int, int] = {}
    for hist in hists:
        for bucket, count in hist.items():
            merged[bucket] = merged.get(bucket, 0) + count
    return merged


@dataclass
class StepMeasurement:
    """What one load step achieved in its steady window.

    `load` is what the search set: users (closed loop) or target req/s (open loop), per `mode`.
    `users` is what the shape asked for (open loop: the rate tokens of its target rate; closed loop:
    the step's user count); `users_running` the fewest that ran in the steady window when fewer did
    (a spawn that lagged, users stopping), None when every second ran them all.
    `requests`, `failures`, `rps`, `error_rate` and percentiles cover the steady window only;
    `total_requests` and `t_start`/`t_end` cover the whole step (for budgets such as max
    invocations or max duration).
    """

    load: float
    rps: float
    requests: int
    failures: int
    duration_s: float
    hist: dict[int, int] = field(default_factory=dict)
    mode: str = MODE_USERS
    users: int = 0
    users_running: int | None = None
    stable: bool = True
    spread: float = 0.0  # largest relative distance of a sub-window's rps from their mean
    unstable_reason: str | None = None
    client_cpu_pct: float | None = None  # average over the steady window
    client_cpu_max: float | None = None
    client_wait_pct: float | None = None  # average over the steady window: runnable, waiting for a CPU
    client_worker: str | None = None  # master: the worker whose own CPU and wait these are (measure/workercpu.py)
    intended_rps: float | None = None  # open loop: mean target rate over the steady window
    sent_rps: float | None = None  # open loop: rate the generator actually sent at, when known
    offered_rps: float | None = None  # open loop: rate it scheduled sends at (sent + dropped at the in-flight cap)
    late_fraction: float | None = None  # open loop: share of sends made late (arrival.count_late)
    dropped_fraction: float | None = None  # open loop: share of intended sends skipped (in-flight cap)
    loop_lag: LoopLag | None = None  # the generator's event-loop lag and CPU throttling over the steady window
    latency_slos: tuple[tuple[float, float], ...] = ()  # (percentile, max ms) the search judges it by, when any
    total_requests: int = 0
    t_start: float = 0.0
    t_end: float = 0.0
    percentiles: dict[float, float | None] = field(default_factory=dict)
    window: list[Second] = field(default_factory=list, repr=False, compare=False)  # the steady window's samples
    undecided: list[str] = field(default_factory=list)  # what its figures still could not decide at the step budget
    measured_again: str | None = None  # why the search ran a load it had measured already again (AGAIN_*)
    _ci95: dict[str, Interval] | None = field(default=None, init=False, repr=False, compare=False)
    _pct_cis: dict[float, Interval] = field(default_factory=dict, init=False, repr=False, compare=False)
    _offered_ci: Interval | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise UsageError(f"unknown step mode {self.mode!r}; choose one of: {', '.join(MODES)}")
        if not self.percentiles and self.hist:
            self.percentiles = {p: histogram_percentile(self.hist, p) for p in DEFAULT_PERCENTILES}
        if not self.total_requests:
            self.total_requests = self.requests

    @property
    def error_rate(self) -> float:
        return self.failures / self.requests if self.requests else 0.0

    @property
    def successes(self) -> int:
        return self.requests - self.failures

    @property
    def goodput_rps(self) -> float:
        """What the searches judge: successful invocations per second over the steady window
        (failures completed fast would otherwise read as throughput); a step judged on another
        objective (plateau.tokens.TokenStep: output tokens/s) overrides it."""
        return self.request_goodput_rps

    @property
    def request_goodput_rps(self) -> float:
        """Successful invocations per second over the steady window, whatever the search judges:
        what every record calls `goodput_rps` (summary.json, steps.csv, the report)."""
        return self.rps * (self.successes / self.requests) if self.requests else 0.0

    def percentile(self, pct: float) -> float | None:
        """Any percentile (percent) of the steady window, in ms."""
        if pct in self.percentiles:
            return self.percentiles[pct]
        if self.hist:
            return histogram_percentile(self.hist, pct)
        return None

    @property
    def p50_ms(self) -> float | None:
        return self.percentile(50.0)

    @property
    def p95_ms(self) -> float | None:
        return self.percentile(95.0)

    @property
    def p99_ms(self) -> float | None:
        return self.percentile(99.0)

    @property
    def ci95(self) -> dict[str, Interval]:
        """95 % intervals of `CI_FIGURES` over the steady window (`window_intervals`), computed once,
        when first asked for (the drivers measure a step under way every tick; only the step they
        keep is asked). All unknown for a measurement built without its window."""
        if self._ci95 is None:
            self._ci95 = window_intervals(self.window)
        return self._ci95

    @property
    def goodput_ci(self) -> Interval:
        """The 95 % interval of `goodput_rps` (what the searches judge; tokens/s for a `TokenStep`)."""
        return self.ci95["goodput_rps"]

    def percentile_interval(self, pct: float) -> Interval:
        """The 95 % interval of any percentile of the steady window (p50 / p95 / p99 from `ci95`)."""
        name = f"p{pct:g}_ms"
        if name in CI_FIGURES:
            return self.ci95[name]
        if not self.window:
            return UNKNOWN
        if pct not in self._pct_cis:  # another percentile (an SLO at p90, p99.9): computed once
            self._pct_cis[pct] = percentile_ci([s.hist for s in self.window], pct,
                                               intervals=[s.interval for s in self.window])
        return self._pct_cis[pct]

    @property
    def offered_ci(self) -> Interval:
        """Open loop: the 95 % interval of `offered_rps` over the steady window's samples with send counts
        (batch means, as the step's rps); unknown without them."""
        if self.offered_rps is None:
            return UNKNOWN
        if self._offered_ci is None:
            sends = [(s.sent + (s.dropped or 0), s.interval) for s in self.window if s.sent is not None]
            self._offered_ci = rate_ci([n for n, _ in sends], [d for _, d in sends]) if sends else UNKNOWN
        return self._offered_ci

    @property
    def offered_short(self) -> bool:
        """Open loop: the generator offered less than `MIN_OFFERED_RATIO` of the intended rate (the point
        value: the client-bound rule, `undelivered_reason`, asks its whole interval)."""
        return self.offered_rps is not None and bool(self.intended_rps) \
            and self.offered_rps < MIN_OFFERED_RATIO * (self.intended_rps or 0.0)

    @property
    def achieved_ratio(self) -> float | None:
        """Open loop: achieved / intended rate (None in closed loop)."""
        if not self.intended_rps:
            return None
        return self.rps / self.intended_rps

    @property
    def failure_dominated(self) -> bool:
        """More than FAILURE_MAJORITY of the step's requests failed."""
        return self.requests > 0 and self.error_rate > FAILURE_MAJORITY

    def failure_reason(self) -> str:
        """The failures of a failure-dominated step, in one phrase."""
        return f"{self.error_rate * 100:.0f} % of {self.requests:,} requests failed"

    @property
    def client_bound_reason(self) -> str | None:
        """Why the load generator (not the endpoint) limited this step, or None (never for a step
        whose failures dominate it: those are the answer). A cgroup's CPU throttling is named first:
        it also reads as waiting for a CPU, and its fix is the limit."""
        if self.failure_dominated:
            return None
        throttled = throttled_reason(self.loop_lag)
        if throttled is not None:
            return throttled
        if self.client_cpu_pct is not None and self.client_cpu_pct >= CLIENT_CPU_LIMIT_PCT:
            return f"client CPU {self.client_cpu_pct:.0f} % >= {CLIENT_CPU_LIMIT_PCT:g} %"
        if self.client_wait_pct is not None and self.client_cpu_pct is not None \
                and self.client_cpu_pct + self.client_wait_pct >= CLIENT_BUSY_LIMIT_PCT:
            return (f"the client ran or waited for a CPU {self.client_cpu_pct + self.client_wait_pct:.0f} % of the"
                    f" time (CPU {self.client_cpu_pct:.0f} %, waiting {self.client_wait_pct:.0f} %; >= "
                    f"{CLIENT_BUSY_LIMIT_PCT:g} %: the machine is too busy for it to keep up)")
        # a window without completed requests measured nothing the lag could have changed (on a master,
        # the workers' reports arrive in lumps: a worker's start-up stall can land on a second before any)
        if self.requests:
            affected = starved_reason(self.client_cpu_pct, self.client_wait_pct) or client_affected_reason(
                self.loop_lag, self.p50_ms) or slo_margin_reason(
                self.loop_lag, [(percentile_label(p), self.percentile(p), ms) for p, ms in self.latency_slos])
            if affected is not None:
                return affected
        if not self.intended_rps:
            return None
        undelivered = undelivered_reason(self.offered_rps, self.offered_ci, self.intended_rps, self.users,
                                         self.users_running)
        if undelivered is not None:
            return undelivered
        if self.late_fraction is not None:
            if self.late_fraction > 1.0 - MIN_ACHIEVED_RATIO:
                return (
                    f"{self.late_fraction * 100:.0f} % of sends were late"
                    f" (> {(1.0 - MIN_ACHIEVED_RATIO) * 100:g} %)"
                )
            return None
        # Without send timing, fall back on what was sent, else on what completed (see module doc).
        achieved, what = (self.sent_rps, "sent") if self.sent_rps is not None else (self.rps, "achieved")
        ratio = achieved / self.intended_rps
        if ratio < MIN_ACHIEVED_RATIO:
            return (
                f"{what} {achieved:.1f} req/s is {ratio * 100:.0f} % of the intended {self.intended_rps:.1f} req/s"
                f" (< {MIN_ACHIEVED_RATIO * 100:g} %)"
            )
        return None

    @property
    def client_bound(self) -> bool:
        return self.client_bound_reason is not None

    def load_label(self) -> str:
        return load_words(self.users or self.load, self.load if self.mode == MODE_RATE else None)

    def as_dict(self) -> dict:
        return {
            "mode": self.mode,
            "load": self.load,
            "users": self.users,
            "users_running": self.users_running,
            "rps": round(self.rps, 3),
            "goodput_rps": round(self.request_goodput_rps, 3),
            "requests": self.requests,
            "failures": self.failures,
            "error_rate": round(self.error_rate, 6),
            "duration_s": self.duration_s,
            "percentiles_ms": {percentile_label(p): v for p, v in sorted(self.percentiles.items())},
            "stable": self.stable,
            "spread": round(self.spread, 4),
            "unstable_reason": self.unstable_reason,
            "client_cpu_pct": self.client_cpu_pct,
            "client_cpu_max": self.client_cpu_max,
            "client_wait_pct": self.client_wait_pct,
            "client_worker": self.client_worker,
            "intended_rps": self.intended_rps,
            "sent_rps": self.sent_rps,
            "offered_rps": self.offered_rps,
            "late_fraction": self.late_fraction,
            "dropped_fraction": self.dropped_fraction,
            "loop_lag": self.loop_lag.to_json() if self.loop_lag is not None else None,
            "client_bound": self.client_bound,
            "client_bound_reason": self.client_bound_reason,
            "total_requests": self.total_requests,
            "t_start": self.t_start,
            "t_end": self.t_end,
            "ci95": intervals_dict(self.ci95),
            "undecided": list(self.undecided),
        }


def undelivered_reason(offered_rps: float | None, offered: Interval, intended_rps: float, users: int,
                       users_running: int | None) -> str | None:
    """Why an open-loop step's load was the generator's shortfall, not the endpoint's, or None.

    `offered_rps` / `offered`: the rate the generator scheduled sends at and its 95 % interval: sent,
    plus dropped at the in-flight cap (a saturated endpoint fills the cap: its drops are load it was
    offered, so its capacity stays the search's to see). Client-bound when the whole interval is under
    `MIN_OFFERED_RATIO` of `intended_rps`: the generator ran fewer rate tokens than the shape asked for
    (a spawn that lagged, a worker that did not start its share) and sent only theirs. `users_running`
    (the fewest tokens that ran, None when all did) names the cause when the runner saw it; alone it
    decides nothing: a master's count trails its workers' reports, and one short second moves no rate."""
    if offered_rps is None or offered.high is None or intended_rps <= 0:
        return None
    if offered.high >= MIN_OFFERED_RATIO * intended_rps:
        return None
    ran = f"ran as few as {users_running} of the {users} users asked for and " if users_running is not None else ""
    return (f"the load generator {ran}offered {offered_rps:.1f} req/s [{offered.low or 0.0:.1f}, {offered.high:.1f}] "
            f"of the {intended_rps:g} req/s asked for ({offered_rps / intended_rps * 100:.0f} %, < "
            f"{MIN_OFFERED_RATIO * 100:g} %): the shortfall is its own, not the endpoint's ({FIX_WORKERS})")


CI_FIGURES = ("rps", "goodput_rps", "p50_ms", "p95_ms", "p99_ms")  # the figures a window's `ci95` covers


def window_intervals(window: Sequence[Second], *, seed: int = 0) -> dict[str, Interval]:
    """95 % intervals of a window's rps, goodput and p50 / p95 / p99 (`measure.uncertainty`: batch
    means for the rates, a block bootstrap for the percentiles), from its per-second samples."""
    if not window:
        return {name: UNKNOWN for name in CI_FIGURES}
    intervals = [s.interval for s in window]
    pcts = percentile_cis([s.hist for s in window], (50.0, 95.0, 99.0), seed=seed, intervals=intervals)
    return {
        "rps": rate_ci([s.requests for s in window], intervals),
        "goodput_rps": rate_ci([s.successes for s in window], intervals),
        "p50_ms": pcts[50.0], "p95_ms": pcts[95.0], "p99_ms": pcts[99.0],
    }


def intervals_dict(intervals: Mapping[str, Interval]) -> dict[str, list[float] | None]:
    """summary.json's `ci95` object: each figure's `[low, high]`, or null when it cannot be computed."""
    return {name: interval.as_list() for name, interval in intervals.items()}


def _stability(window: Sequence[Second], min_subwindow_s: float = MIN_SUBWINDOW_S) -> tuple[bool, float, str | None]:
    """(stable, spread, reason): split into sub-windows of equal duration and compare their rps."""
    total_s = sum(s.interval for s in window)
    if total_s < STABILITY_WINDOWS * min_subwindow_s - 1e-9:
        return False, 0.0, (
            f"steady window {total_s:.3g} s is too short to judge stability"
            f" (needs {STABILITY_WINDOWS} x {min_subwindow_s:g} s)"
        )
    bounds = [total_s * (i + 1) / STABILITY_WINDOWS for i in range(STABILITY_WINDOWS)]
    counts = [0.0] * STABILITY_WINDOWS
    durations = [0.0] * STABILITY_WINDOWS
    elapsed = 0.0
    index = 0
    for second in window:
        # A sample belongs to the sub-window in which it ends (Locust samples end on the tick).
        elapsed += second.interval
        while index < STABILITY_WINDOWS - 1 and elapsed > bounds[index] + 1e-9:
            index += 1
        counts[index] += second.requests
        durations[index] += second.interval
    rates = [c / d for c, d in zip(counts, durations, strict=True) if d > 0]
    mean = sum(rates) / len(rates)
    if mean <= 0:
        return False, 0.0, "no requests completed in the steady window"
    spread = max(abs(r - mean) / mean for r in rates)
    if spread > STABILITY_TOLERANCE:
        return False, spread, (
            f"throughput varies {spread * 100:.0f} % between sub-windows (> {STABILITY_TOLERANCE * 100:g} %)"
        )
    return True, spread, None


def steady_window(
    seconds: Sequence[Second],
    warmup_s: float = DEFAULT_WARMUP_S,
    warmup_fraction: float = DEFAULT_WARMUP_FRACTION,
) -> list[Second]:
    """The step without ramping seconds and without its warm-up (the larger of the two limits)."""
    if warmup_s < 0 or not 0.0 <= warmup_fraction < 1.0:
        raise UsageError(
            f"warm-up must be >= 0 s and a fraction in [0, 1); got {warmup_s!r} s and {warmup_fraction!r}"
        )
    settled = [s for s in seconds if not s.spawning]
    total_s = sum(s.interval for s in settled)
    drop_s = max(warmup_s, warmup_fraction * total_s)
    window: list[Second] = []
    elapsed = 0.0
    for second in settled:
        elapsed += second.interval
        if elapsed > drop_s + 1e-9:
            window.append(second)
    return window


def steady_samples(run_s: float) -> int:
    """How many one-second samples the steady window of a constant run of `run_s` seconds keeps:
    `steady_window` with the recorder's defaults over its whole seconds at one load, none ramping (a
    sweep's constant users start at once). For plans: what the run's intervals will rest on."""
    whole = max(0, int(run_s + 1e-9))
    return len(steady_window([Second(t=float(i + 1), users=1, spawning=False, requests=0, failures=0)
                              for i in range(whole)]))


def measure_step(
    seconds: Sequence[Second],
    *,
    mode: str = MODE_USERS,
    load: float | None = None,
    warmup_s: float = DEFAULT_WARMUP_S,
    warmup_fraction: float = DEFAULT_WARMUP_FRACTION,
    percentiles: Iterable[float] = DEFAULT_PERCENTILES,
    sent_rps: float | None = None,
    late_fraction: float | None = None,
    min_subwindow_s: float = MIN_SUBWINDOW_S,
) -> StepMeasurement:
    """Summarise one step (the `Second`s recorded while one load was applied).

    Open loop: pass `sent_rps` or `late_fraction` (from `arrival.count_late`) when known, so a
    saturated endpoint is not mistaken for a generator that fell behind.
    `min_subwindow_s`: the shortest stability sub-window that can be judged: one worker report
    period (3 s) on a master, 1 s on a local runner whose samples are exact per second.
    """
    if mode not in MODES:
        raise UsageError(f"unknown step mode {mode!r}; choose one of: {', '.join(MODES)}")
    if not seconds:
        raise UsageError("cannot measure an empty step: no samples were recorded")
    window = steady_window(seconds, warmup_s, warmup_fraction)
    if not window:  # all ramping or all warm-up: use what there is and call it unstable
        window = [s for s in seconds if not s.spawning] or list(seconds)
    duration = sum(s.interval for s in window)
    requests = sum(s.requests for s in window)
    failures = sum(s.failures for s in window)
    hist = merge_histograms(s.hist for s in window)
    stable, spread, why = _stability(window, min_subwindow_s)
    cpus = [s.client_cpu_pct for s in window if s.client_cpu_pct is not None]
    waits = [s.client_wait_pct for s in window if s.client_wait_pct is not None]
    targets = [s.target_rate for s in window if s.target_rate is not None]
    asked = [s.target_users for s in window if s.target_users is not None]
    users = asked[-1] if asked else window[-1].users  # what the shape asked for, not a lagging sample
    fewest = min(s.users for s in window)
    intended = sum(targets) / len(targets) if targets else None
    dropped_fraction = offered_rps = None
    sends = [(s.sent, s.dropped or 0, s.late or 0) for s in window if s.sent is not None]
    scheduled = sum(sent + dropped for sent, dropped, _ in sends)
    if scheduled and duration > 0:  # open-loop send counts recorded in the timeline (sm_locust.users.openloop)
        sent = sum(n for n, _, _ in sends)
        if sent_rps is None:
            sent_rps = sent / duration
        if late_fraction is None and scheduled:
            late_fraction = sum(late for _, _, late in sends) / scheduled
        dropped_fraction = (scheduled - sent) / scheduled
        # what the generator tried to send, whatever the endpoint did with it (none counted: counts unknown)
        offered_rps = scheduled / sum(s.interval for s in window if s.sent is not None)
    lag = merge_counts(s.loop_lag for s in window)
    cpu_pct, cpu_max, wait_pct = (sum(cpus) / len(cpus) if cpus else None), max(cpus, default=None), (
        sum(waits) / len(waits) if waits else None)
    paired = window_pair(s.client_workers for s in window if s.client_workers)  # a master: one worker's pair
    if paired is not None:
        cpu_pct, wait_pct, cpu_max = paired[0].cpu_pct, paired[0].wait_pct, paired[1]
    if load is None:
        load = float(intended if mode == MODE_RATE and intended is not None else users)
    first = seconds[0]
    return StepMeasurement(
        load=float(load),
        rps=requests / duration if duration > 0 else 0.0,
        requests=requests,
        failures=failures,
        duration_s=duration,
        hist=hist,
        mode=mode,
        users=users,
        users_running=fewest if fewest < users else None,
        stable=stable,
        spread=spread,
        unstable_reason=why,
        client_cpu_pct=cpu_pct,
        client_cpu_max=cpu_max,
        client_wait_pct=wait_pct,
        client_worker=paired[0].worker if paired is not None else None,
        intended_rps=intended if mode == MODE_RATE else None,
        sent_rps=sent_rps,
        offered_rps=offered_rps,
        late_fraction=late_fraction,
        dropped_fraction=dropped_fraction,
        loop_lag=LoopLag.of(lag) if lag is not None else None,
        total_requests=sum(s.requests for s in seconds),
        t_start=first.t - first.interval,
        t_end=seconds[-1].t,
        percentiles={float(p): histogram_percentile(hist, float(p)) for p in percentiles},
        window=list(window),
    )


def split_steps(seconds: Sequence[Second], mode: str = MODE_USERS) -> list[list[Second]]:
    """Cut a whole timeline into steps: maximal runs of one user count (or target rate).

    Ramping seconds (`spawning`) separate steps and belong to none; so do seconds without users
    (the test stopping, an open-loop drain pause) and seconds without a target rate in rate mode.
    """
    if mode not in MODES:
        raise UsageError(f"unknown step mode {mode!r}; choose one of: {', '.join(MODES)}")
    steps: list[list[Second]] = []
    current: list[Second] = []
    key: object = None
    for second in seconds:
        this = second.users if mode == MODE_USERS else second.target_rate
        if second.spawning or this is None or second.users <= 0 or (mode == MODE_USERS and this <= 0):
            if current:
                steps.append(current)
            current, key = [], None
            continue
        if current and this != key:
            steps.append(current)
            current = []
        current.append(second)
        key = this
    if current:
        steps.append(current)
    return steps


def timeline_mode(seconds: Sequence[Second]) -> str:
    """How a recorded timeline is cut into steps: by target rate when one was recorded (open
    loop), else by user count."""
    return MODE_RATE if any(s.target_rate is not None for s in seconds) else MODE_USERS


def measure_timeline(seconds: Sequence[Second], mode: str = MODE_USERS, **kwargs) -> list[StepMeasurement]:
    """`split_steps` then `measure_step` on each: the per-step records of a finished run."""
    return [measure_step(step, mode=mode, **kwargs) for step in split_steps(seconds, mode)]
