"""The load generator's own delay, the pure part: loop-lag counts, their figures, the client-affected rule.

A starved generator can read low CPU yet delay every response in flight; its event loop's lag (a
timer waking late) shows it. `record.looplag` samples the lag and the cgroup's CPU throttling; here
`LagCounts` (one interval's mergeable readings), `LoopLag` (summary.json's figures) and
`client_affected_reason`: lag p99 at `LAG_P99_OF_P50` of the step's p50 while lagging at least
`LAGGING_LIMIT` of the time, throttled in `THROTTLED_PERIODS_LIMIT` of CFS periods, or an SLO broken
by less than the lag p99 (`slo_margin_reason`), or a generator that waited for a CPU far longer than
it ran (`starved_reason`: its wait is on every response that completed meanwhile, yet its timer
oversleeps little, the stalls being shorter than the sampling interval). The rules' evidence is in
docs/facts.md; the reason names the fix.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sm_locust.util.formatting import latency

LAG_P99_OF_P50 = 0.5  # lag p99 >= half the step's p50: the generator's stalls are long beside a request ...
LAGGING_LIMIT = 0.35  # ... and its loop was behind >= 35 % of the time: often enough to be in what it measured
MIN_LAG_SAMPLES = 100  # fewer oversleep samples than this (under a second of sampling) judge nothing
THROTTLED_PERIODS_LIMIT = 0.05  # throttled in >= 5 % of CFS periods: p95's requests may each have waited a period
STARVED_WAIT_OF_RUN = 1.5  # waited for a CPU >= 1.5 times as long as it ran (quiet steps measured <= 1.3) ...
STARVED_WAIT_PCT = 10.0  # ... over >= 10 % of the step: a response read that much later is 2x the search's tolerance
STARVED_MIN_CPU_PCT = 5.0  # ... by a generator that ran more than 5 %: up to it, capacities measured right beside hogs
FIX_WORKERS = "add workers"  # what a verdict says to do about a starved load generator ...
FIX_CPU_LIMIT = "raise the pod's CPU limit"  # ... and about one its cgroup's CPU limit throttled
BOTTLENECK = "the load generator was the bottleneck"  # a verdict's words when the client held back a step it rests on
_SUBJECTS = (("the load generator's ", "its "), ("the load generator ", "it "), ("the client ", "it "))


def continuing(reason: str) -> str:
    """A step's client-bound reason read after `BOTTLENECK`, its subject not said twice: 'the load
    generator ran ...' continues 'it ran ...', 'the load generator's event loop ...' 'its event loop ...'."""
    for subject, pronoun in _SUBJECTS:
        if reason.startswith(subject):
            return pronoun + reason[len(subject):]
    return reason


def bottleneck_reason(reason: str, fix: str) -> str:
    """The one wording of a verdict the load generator decided: 'the load generator was the bottleneck
    (add workers): client CPU 97 % ...', the fix left out where the reason names it already
    ('...: it ran as few as 6 of the 10 users ... (add workers)'). `reason`: the step's own."""
    lead = BOTTLENECK if not fix or fix in reason else f"{BOTTLENECK} ({fix})"
    return f"{lead}: {continuing(reason)}" if reason else lead


def quotes_reason(text: str, reason: str) -> bool:
    """`text` (a verdict's reason) quotes the step's client-bound `reason`, as written or as `continuing` words it."""
    return bool(reason) and (reason in text or continuing(reason) in text)


def lag_bucket_us(lag_us: float) -> int:
    """An oversleep in microseconds rounded to 2 significant digits (Locust's histogram rule, in us)."""
    value = int(round(lag_us))
    if value < 100:
        return max(0, value)
    scale = 10 ** (len(str(value)) - 2)
    return int(round(value / scale)) * scale


@dataclass
class LagCounts:
    """Loop-lag readings over some interval, mergeable across intervals and processes.

    `periods` / `throttled` / `throttled_us` are None where no cgroup CPU limit was read."""

    hist_us: dict[int, int] = field(default_factory=dict)  # oversleep bucket (us) -> samples
    lag_us: float = 0.0  # sum of oversleeps
    span_us: float = 0.0  # sum of the sampled sleeps' wall time (requested + oversleep)
    max_us: float = 0.0
    periods: int | None = None  # CFS periods elapsed (cgroup cpu.stat nr_periods)
    throttled: int | None = None  # of those, periods the cgroup was throttled in (nr_throttled)
    throttled_us: float | None = None  # time throttled (v2 throttled_usec, v1 throttled_time / 1000)

    @property
    def samples(self) -> int:
        return sum(self.hist_us.values())

    def add_sample(self, slept_us: float, lag_us: float) -> None:
        """One timer's sleep: the wall time it took and how much of it was oversleep."""
        bucket = lag_bucket_us(lag_us)
        self.hist_us[bucket] = self.hist_us.get(bucket, 0) + 1
        self.lag_us += lag_us
        self.span_us += slept_us
        if lag_us > self.max_us:
            self.max_us = lag_us

    def add_throttling(self, periods: int, throttled: int, throttled_us: float) -> None:
        self.periods = (self.periods or 0) + periods
        self.throttled = (self.throttled or 0) + throttled
        self.throttled_us = (self.throttled_us or 0.0) + throttled_us

    def merge(self, other: LagCounts) -> None:
        for bucket, count in other.hist_us.items():
            self.hist_us[bucket] = self.hist_us.get(bucket, 0) + count
        self.lag_us += other.lag_us
        self.span_us += other.span_us
        self.max_us = max(self.max_us, other.max_us)
        if other.periods is not None:
            self.add_throttling(other.periods, other.throttled or 0, other.throttled_us or 0.0)

    def take(self) -> LagCounts:
        """These counts, and this object emptied: the delta since the last take."""
        taken = LagCounts(self.hist_us, self.lag_us, self.span_us, self.max_us, self.periods, self.throttled,
                          self.throttled_us)
        self.hist_us, self.lag_us, self.span_us, self.max_us = {}, 0.0, 0.0, 0.0
        self.periods = self.throttled = None
        self.throttled_us = None
        return taken

    def __bool__(self) -> bool:
        return bool(self.hist_us) or self.periods is not None

    def percentile_us(self, pct: float) -> float | None:
        """A percentile (percent) of the oversleeps: the smallest bucket with `pct` % of samples at or below."""
        total = self.samples
        if not total:
            return None
        wanted = total * pct / 100.0
        seen = 0
        for bucket in sorted(self.hist_us):
            seen += self.hist_us[bucket]
            if seen >= wanted:
                return float(bucket)
        return float(max(self.hist_us))

    def to_json(self) -> dict[str, Any]:
        """The wire and timeline.jsonl form (string keys: JSON and Locust's worker messages)."""
        data: dict[str, object] = {"hist_us": {str(k): v for k, v in self.hist_us.items()},
                                "lag_us": round(self.lag_us, 1), "span_us": round(self.span_us, 1),
                                "max_us": round(self.max_us, 1)}
        if self.periods is not None:
            data.update(periods=self.periods, throttled=self.throttled, throttled_us=self.throttled_us)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LagCounts:
        periods = data.get("periods")
        return cls(hist_us={int(k): int(v) for k, v in (data.get("hist_us") or {}).items()},
                   lag_us=float(data.get("lag_us") or 0.0), span_us=float(data.get("span_us") or 0.0),
                   max_us=float(data.get("max_us") or 0.0),
                   periods=None if periods is None else int(periods),
                   throttled=None if periods is None else int(data.get("throttled") or 0),
                   throttled_us=None if periods is None else float(data.get("throttled_us") or 0.0))


def merge_counts(parts: Iterable[LagCounts | None]) -> LagCounts | None:
    """Every part added up; None when none was measured."""
    merged: LagCounts | None = None
    for part in parts:
        if part is None:
            continue
        if merged is None:
            merged = LagCounts()
        merged.merge(part)
    return merged


@dataclass(frozen=True)
class LoopLag:
    """A step's (or a run's, or one process's) loop lag: what summary.json shows."""

    samples: int
    p50_ms: float | None
    p99_ms: float | None
    max_ms: float | None
    lagging: float | None  # share of the sampled time the loop was behind its timer
    throttled_periods: float | None = None  # share of CFS periods throttled (None: no cgroup limit read)
    throttled_s: float | None = None

    @classmethod
    def of(cls, counts: LagCounts) -> LoopLag:
        def ms(us: float | None) -> float | None:
            return None if us is None else round(us / 1000.0, 3)

        share = None
        if counts.periods is not None:
            share = round((counts.throttled or 0) / counts.periods, 4) if counts.periods else 0.0
        return cls(samples=counts.samples, p50_ms=ms(counts.percentile_us(50.0)), p99_ms=ms(counts.percentile_us(99.0)),
                   max_ms=ms(counts.max_us) if counts.samples else None,
                   lagging=round(counts.lag_us / counts.span_us, 4) if counts.span_us > 0 else None,
                   throttled_periods=share,
                   throttled_s=None if counts.throttled_us is None else round(counts.throttled_us / 1e6, 3))

    def to_json(self) -> dict[str, Any]:
        return {"samples": self.samples, "p50_ms": self.p50_ms, "p99_ms": self.p99_ms, "max_ms": self.max_ms,
                "lagging": self.lagging, "throttled_periods": self.throttled_periods, "throttled_s": self.throttled_s}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> LoopLag | None:
        """A summary.json record's `loop_lag`; None when absent (a run folder from before it)."""
        if not isinstance(data, Mapping):
            return None

        def num(key: str) -> float | None:
            value = data.get(key)
            return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

        return cls(samples=int(data.get("samples") or 0), p50_ms=num("p50_ms"), p99_ms=num("p99_ms"),
                   max_ms=num("max_ms"), lagging=num("lagging"), throttled_periods=num("throttled_periods"),
                   throttled_s=num("throttled_s"))

    def text(self) -> str:
        """The step line's words: `loop lag p99 12 ms`, and throttling when there was some."""
        words = f"loop lag p99 {latency(self.p99_ms, ' ms')}" if self.samples else ""
        if self.throttled_periods:
            words += f"{', ' if words else ''}CPU-throttled in {self.throttled_periods * 100:.0f} % of CFS periods"
        return words


def throttled_reason(lag: LoopLag | None) -> str | None:
    """The cgroup CPU limit held the generator back in `THROTTLED_PERIODS_LIMIT` of its CFS periods or more."""
    throttled = (lag.throttled_periods or 0.0) if lag is not None else 0.0
    if throttled < THROTTLED_PERIODS_LIMIT:
        return None
    return (f"the load generator was CPU-throttled by its cgroup limit in {throttled * 100:.0f} % of CFS periods "
            f"(>= {THROTTLED_PERIODS_LIMIT * 100:g} %): {FIX_CPU_LIMIT}")


def generator_fix(lag: LoopLag | None) -> str:
    """What to do about a load generator that held a step back: raise the pod's CPU limit when its
    cgroup throttled it (`throttled_reason`), else add workers."""
    return FIX_CPU_LIMIT if throttled_reason(lag) is not None else FIX_WORKERS


def client_affected_reason(lag: LoopLag | None, p50_ms: float | None) -> str | None:
    """Why the load generator's own delay makes a step's figures its own, or None (module doc).

    `p50_ms`: the step's median latency. Throttling names the pod's CPU limit as the fix; a lag
    without throttling names more workers (or a CPU of the generator's own)."""
    if lag is None:
        return None
    throttled = throttled_reason(lag)
    if throttled is not None:
        return throttled
    if lag.samples < MIN_LAG_SAMPLES or lag.p99_ms is None or not p50_ms or p50_ms <= 0:
        return None
    if lag.p99_ms >= LAG_P99_OF_P50 * p50_ms and (lag.lagging or 0.0) >= LAGGING_LIMIT:
        fix = FIX_CPU_LIMIT if lag.throttled_periods else f"{FIX_WORKERS}, or give the load generator a CPU of its own"
        return (f"the load generator's event loop lagged p99 {latency(lag.p99_ms, ' ms')} (>= "
                f"{LAG_P99_OF_P50 * 100:g} % of the step's p50 {latency(p50_ms, ' ms')}) and was behind "
                f"{(lag.lagging or 0.0) * 100:.0f} % of the time (>= {LAGGING_LIMIT * 100:g} %): responses waited for "
                f"the client, so its latency and throughput are the client's ({fix})")
    return None


def starved_reason(cpu_pct: float | None, wait_pct: float | None) -> str | None:
    """Why a load generator that the machine starved of CPU made a step's figures its own, or None.

    `cpu_pct` / `wait_pct`: the share of the step it ran and waited for a CPU (runnable, on a run
    queue: Linux schedstat). Every response that completes while the generator waits is read late, so
    a wait of `STARVED_WAIT_PCT` of the step adds about that share to a closed loop's cycle and takes
    it off its throughput; waiting `STARVED_WAIT_OF_RUN` times as long as it ran says the waits are the
    CPU being given to others, not the wake-ups of a busy machine (docs/facts.md has both thresholds'
    evidence). Neither figure alone: a quiet generator at its busiest waits up to 22 % beside its own 17 %.
    A generator that ran `STARVED_MIN_CPU_PCT` or less is not judged: README's plateau example (3-5 %
    of a CPU at its capacity) measured the endpoint right beside 6 hogs, and on a busy machine one at
    1 user and 3 % CPU waited 29 % of the time while the capacity, decided steps above, was measured
    right (docs/plateau.md, "The client self-check")."""
    if cpu_pct is None or wait_pct is None or wait_pct < STARVED_WAIT_PCT or cpu_pct <= STARVED_MIN_CPU_PCT:
        return None
    if wait_pct < STARVED_WAIT_OF_RUN * cpu_pct:
        return None
    times = f"{wait_pct / cpu_pct:.1f} times"
    return (f"the load generator waited for a CPU {wait_pct:.0f} % of the step, {times} as long as it ran "
            f"({cpu_pct:.0f} %; >= {STARVED_WAIT_PCT:g} % and {STARVED_WAIT_OF_RUN:g} times): responses that "
            f"completed while it waited were read late, so its latency and throughput are partly the client's "
            f"({FIX_WORKERS} on CPUs of their own, or give the load generator a CPU of its own)")


def slo_margin_reason(lag: LoopLag | None, measured: Iterable[tuple[str, float | None, float]]) -> str | None:
    """A latency SLO broken by less than the loop lag p99, or None. `measured`: (label, the step's
    percentile in ms, the SLO in ms) per latency SLO. A percentile within its SLO is not judged: the
    generator's stalls only add latency, so the endpoint's own was within it too. As for the p50 rule,
    only a loop behind `LAGGING_LIMIT` of the time or more: rare stalls move no percentile by their p99."""
    if lag is None or lag.samples < MIN_LAG_SAMPLES or lag.p99_ms is None or (lag.lagging or 0.0) < LAGGING_LIMIT:
        return None
    for label, value, slo_ms in measured:
        if value is not None and slo_ms < value <= slo_ms + lag.p99_ms:
            return (f"{label} {latency(value, ' ms')} is over its SLO {latency(slo_ms, ' ms')} by less than the load "
                    f"generator's event-loop lag p99 {latency(lag.p99_ms, ' ms')}: the breach may be the client's "
                    f"(add workers, or give the load generator a CPU of its own)")
    return None
