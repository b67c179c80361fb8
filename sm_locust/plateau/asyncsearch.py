"""The async endpoint's capacity, pure: the arrival rate past which its backlog grows steadily
(docs/async.md, "Finding the capacity").

Below its capacity an asynchronous endpoint's backlog (calls accepted, result not yet seen) wanders
around a level; above it, it grows by (arrivals - completions) each second for as long as the rate is
held. So a step is judged by the backlog's **slope**: the mean of its per-second changes, with a 95 %
interval by batch means over those changes (`measure.uncertainty`: the changes are a stationary,
serially correlated series; the backlog itself is not, so no regression on it). The backlog
**grows** when the slope's interval lies above 0; it is **bounded** when the interval reaches 0 or
below and its upper end is within the tolerance (in the search: a tenth of the step's rate, at most
that share of the arrivals piling up); a wider interval, or fewer than 4 changes, is **undecided**.
The first `settle_s` seconds of a step (the change of rate) are left out.

`AsyncRateSearch` raises the rate by `step_rps` each step from `start_rps` to `max_rps` and stops at
the first step whose backlog grows. The capacity is bracketed: at least the highest rate before it
shown bounded (`capacity_rps`; None when none was), below the rate shown growing (`grows_at_rps`);
reaching `max_rps` without growth says the capacity is at least the highest bounded rate. A rate just
past the capacity grows too slowly for a short step's interval to show it, and a rate just below it
wanders too much to be shown bounded, so the bracket narrows as steps lengthen
(tests/plateau/test_asyncsearch.py, synthetic queues).

With a time-to-result SLO (`plateau.asyncslo`), a step counts toward the capacity only when its
backlog is bounded AND its percentile time to result keeps the SLO (its interval wholly within it);
the first step whose interval lies wholly above the SLO ends the search too. A step whose SLO verdict
is undecided is held longer (`extend`), at most `max_extensions` times its length; still undecided
and above the capacity found, it makes the search INCONCLUSIVE (`inconclusive_reason`): the capacity
may lie there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from sm_locust.measure.uncertainty import UNKNOWN, Interval, batch_index, t_quantile
from sm_locust.plateau.asyncslo import BREACH, KEEPS, SloJudgement, TimeToResultSlo
from sm_locust.plateau.asyncslo import UNDECIDED as SLO_UNDECIDED

MAX_EXTENSIONS = 2
"""With an SLO, a step whose SLO verdict is undecided is held up to this many more times its length."""
GROWS = "grows"
BOUNDED = "bounded"
UNDECIDED = "undecided"


def mean_ci(values: Sequence[float] | np.ndarray) -> tuple[float | None, Interval]:
    """The mean of consecutive, serially correlated `values` and its 95 % interval by batch means
    (about sqrt(n)-sample batches, Student's t); (None, unknown) for fewer than 4 values."""
    x = np.asarray(values, dtype="float64")
    if len(x) == 0:
        return None, UNKNOWN
    mean = float(x.mean())
    index, k = batch_index(np.ones(len(x)))
    if k < 2:
        return mean, UNKNOWN
    batches = np.bincount(index, weights=x, minlength=k) / np.bincount(index, minlength=k)
    se = float(np.std(batches, ddof=1)) / math.sqrt(k)
    half = t_quantile(k - 1) * se
    return mean, Interval(mean - half, mean + half)


@dataclass(frozen=True)
class BacklogSlope:
    """A step's backlog slope (calls per second) with its 95 % interval, and what it says."""

    slope: float | None
    interval: Interval
    samples: int
    tolerance: float | None = None  # calls/s the upper end may reach and still be bounded (None: any)

    @property
    def verdict(self) -> str:
        low, high = self.interval.low, self.interval.high
        if low is None or high is None:
            return UNDECIDED
        if low > 0:
            return GROWS
        return BOUNDED if self.tolerance is None or high <= self.tolerance else UNDECIDED

    def as_dict(self) -> dict:
        return {"backlog_slope_per_s": None if self.slope is None else round(self.slope, 3),
                "backlog_slope_ci95": self.interval.as_list(), "samples": self.samples,
                "tolerance_per_s": self.tolerance, "backlog": self.verdict}


def backlog_slope(backlog: Sequence[float], settle_s: int = 0, tolerance: float | None = None) -> BacklogSlope:
    """The slope of a step's per-second backlog samples, its first `settle_s` samples left out."""
    kept = list(backlog)[max(0, settle_s):]
    changes = np.diff(np.asarray(kept, dtype="float64")) if len(kept) > 1 else np.zeros(0)
    slope, interval = mean_ci(changes)
    return BacklogSlope(slope, interval, len(changes), tolerance)


@dataclass(frozen=True)
class AsyncStep:
    """One judged step: its arrival rate, its backlog's slope, and its time to result against the SLO
    (None without one); `extensions`: how many times it was held longer to decide the SLO."""

    rate_rps: float
    slope: BacklogSlope
    backlog_last: float | None = None
    slo: SloJudgement | None = None
    extensions: int = 0

    @property
    def acceptable(self) -> bool:
        """Bounded backlog and, with an SLO, a time to result shown within it."""
        return self.slope.verdict == BOUNDED and (self.slo is None or self.slo.verdict == KEEPS)

    @property
    def stops(self) -> bool:
        """The backlog grows or the time to result breaks the SLO: no higher rate is tried."""
        return self.slope.verdict == GROWS or (self.slo is not None and self.slo.verdict == BREACH)

    def as_dict(self) -> dict:
        out = {"rate_rps": self.rate_rps, **self.slope.as_dict(), "backlog_last": self.backlog_last}
        if self.slo is not None:
            out.update(self.slo.as_dict(), extensions=self.extensions)
        return out


@dataclass
class AsyncRateSearch:
    """Rate steps until the backlog grows or the time to result breaks the SLO (module doc)."""

    start_rps: float
    step_rps: float
    max_rps: float
    settle_s: int = 2
    tolerance_share: float = 0.1
    slo: TimeToResultSlo | None = None
    max_extensions: int = MAX_EXTENSIONS
    steps: list[AsyncStep] = field(default_factory=list)
    stop_reason: str | None = None

    def __post_init__(self) -> None:
        if not (self.start_rps > 0 and self.step_rps > 0 and self.max_rps >= self.start_rps):
            raise ValueError(f"async search needs start > 0, step > 0, max >= start: {self}")

    @property
    def rate_rps(self) -> float:
        """The rate of the step under way."""
        return min(self.max_rps, self.start_rps + self.step_rps * len(self.steps))

    def slope_of(self, backlog: Sequence[float]) -> BacklogSlope:
        """The step under way's backlog slope, with the search's settling and tolerance."""
        return backlog_slope(backlog, self.settle_s, self.tolerance_share * self.rate_rps)

    def extend(self, backlog: Sequence[float], slo: SloJudgement | None, extensions: int) -> bool:
        """Whether the step under way, held `extensions` times longer so far, should be held once more:
        its SLO verdict is undecided, its backlog does not grow, and its budget is not spent."""
        if slo is None or slo.verdict != SLO_UNDECIDED or extensions >= self.max_extensions:
            return False
        return self.slope_of(backlog).verdict != GROWS

    def judge(self, backlog: Sequence[float], slo: SloJudgement | None = None, extensions: int = 0) -> AsyncStep:
        """Judge the step under way from its per-second backlog (and its SLO judgement, with an SLO);
        sets `stop_reason` when the search ends."""
        step = AsyncStep(self.rate_rps, self.slope_of(backlog), float(backlog[-1]) if len(backlog) else None,
                         slo, extensions)
        self.steps.append(step)
        capacity = self.capacity_rps
        bracket = (f"capacity {capacity:g} to {step.rate_rps:g} req/s" if capacity is not None
                   else f"capacity below {step.rate_rps:g} req/s")
        slope = step.slope
        if slope.verdict == GROWS:
            self.stop_reason = (f"backlog grows at {step.rate_rps:g} req/s ({slope.slope:+.2f} calls/s, 95 % "
                                f"{slope.interval.low:+.2f} to {slope.interval.high:+.2f}): {bracket}")
        elif slo is not None and slo.verdict == BREACH:
            self.stop_reason = f"at {step.rate_rps:g} req/s the {slo.reason()}: {bracket}"
        elif step.rate_rps >= self.max_rps:
            self.stop_reason = (f"max rate {self.max_rps:g} req/s reached without a growing backlog"
                                + ("" if self.slo is None else " or a time to result above the SLO"))
        return step

    @property
    def capacity_rps(self) -> float | None:
        """The highest rate judged before the first stopping step that was acceptable (bounded
        backlog; with an SLO, a time to result within it)."""
        best = None
        for step in self.steps:
            if step.stops:
                break
            if step.acceptable:
                best = step.rate_rps
        return best

    @property
    def grows_at_rps(self) -> float | None:
        """The rate whose backlog was shown growing (the search's last step), or None."""
        return self.steps[-1].rate_rps if self.steps and self.steps[-1].slope.verdict == GROWS else None

    @property
    def slo_breach_at_rps(self) -> float | None:
        """The rate whose time to result was shown above the SLO (the search's last step), or None."""
        last = self.steps[-1] if self.steps else None
        return last.rate_rps if last is not None and last.slo is not None and last.slo.verdict == BREACH else None

    @property
    def inconclusive_reason(self) -> str | None:
        """Why the capacity cannot be stated: a step above it whose SLO verdict stayed undecided after
        its extensions (the capacity may lie there), or None."""
        capacity = self.capacity_rps
        for step in self.steps:
            if step.slo is None or step.slo.verdict != SLO_UNDECIDED or step.slope.verdict == GROWS:
                continue
            if capacity is None or step.rate_rps > capacity:
                return (f"at {step.rate_rps:g} req/s the {step.slo.reason()} after {step.extensions} extension(s) "
                        "of the step: hold steps longer (--step-seconds)")
        return None

    def as_dict(self) -> dict:
        out = {"start_rps": self.start_rps, "step_rps": self.step_rps, "max_rps": self.max_rps,
               "capacity_rps": self.capacity_rps, "grows_at_rps": self.grows_at_rps,
               "stop_reason": self.stop_reason,
               "steps": [step.as_dict() for step in self.steps]}
        if self.slo is not None:
            reason = self.inconclusive_reason
            out.update(time_to_result_slo_ms=self.slo.max_ms, slo_percentile=self.slo.percentile,
                       slo_breach_at_rps=self.slo_breach_at_rps,
                       verdict="INCONCLUSIVE" if reason else "conclusive", inconclusive_reason=reason)
        return out
