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
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from sm_locust.measure.uncertainty import UNKNOWN, Interval, batch_index, t_quantile

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
    """One judged step: its arrival rate and its backlog's slope."""

    rate_rps: float
    slope: BacklogSlope
    backlog_last: float | None = None

    def as_dict(self) -> dict:
        return {"rate_rps": self.rate_rps, **self.slope.as_dict(), "backlog_last": self.backlog_last}


@dataclass
class AsyncRateSearch:
    """Rate steps until the backlog grows (module doc)."""

    start_rps: float
    step_rps: float
    max_rps: float
    settle_s: int = 2
    tolerance_share: float = 0.1
    steps: list[AsyncStep] = field(default_factory=list)
    stop_reason: str | None = None

    def __post_init__(self) -> None:
        if not (self.start_rps > 0 and self.step_rps > 0 and self.max_rps >= self.start_rps):
            raise ValueError(f"async search needs start > 0, step > 0, max >= start: {self}")

    @property
    def rate_rps(self) -> float:
        """The rate of the step under way."""
        return min(self.max_rps, self.start_rps + self.step_rps * len(self.steps))

    def judge(self, backlog: Sequence[float]) -> AsyncStep:
        """Judge the step under way from its per-second backlog; sets `stop_reason` when the search ends."""
        slope = backlog_slope(backlog, self.settle_s, self.tolerance_share * self.rate_rps)
        step = AsyncStep(self.rate_rps, slope, float(backlog[-1]) if len(backlog) else None)
        self.steps.append(step)
        if slope.verdict == GROWS:
            capacity = self.capacity_rps
            self.stop_reason = (f"backlog grows at {step.rate_rps:g} req/s ({slope.slope:+.2f} calls/s, 95 % "
                                f"{slope.interval.low:+.2f} to {slope.interval.high:+.2f}): capacity "
                                + (f"{capacity:g} to {step.rate_rps:g} req/s" if capacity is not None
                                   else f"below {step.rate_rps:g} req/s"))
        elif step.rate_rps >= self.max_rps:
            self.stop_reason = f"max rate {self.max_rps:g} req/s reached without a growing backlog"
        return step

    @property
    def capacity_rps(self) -> float | None:
        """The highest rate judged before the first growing backlog whose own backlog was bounded."""
        best = None
        for step in self.steps:
            if step.slope.verdict == GROWS:
                break
            if step.slope.verdict == BOUNDED:
                best = step.rate_rps
        return best

    @property
    def grows_at_rps(self) -> float | None:
        """The rate whose backlog was shown growing (the search's last step), or None."""
        return self.steps[-1].rate_rps if self.steps and self.steps[-1].slope.verdict == GROWS else None

    def as_dict(self) -> dict:
        return {"start_rps": self.start_rps, "step_rps": self.step_rps, "max_rps": self.max_rps,
                "capacity_rps": self.capacity_rps, "grows_at_rps": self.grows_at_rps,
                "stop_reason": self.stop_reason,
                "steps": [step.as_dict() for step in self.steps]}
