"""Over-saturation (`--stop-when-oversaturated`): an open-loop run's endpoint no longer keeps up, on intervals.

Open-loop sends keep coming whatever the answers, so an endpoint past its capacity queues them: the
requests waiting grow without bound while completions stay where they are, and every latency (an
LLM's TTFT first) grows with the queue. Over the last `WINDOW_S` to `MAX_WINDOW_S` seconds, the rule says
over-saturated when all hold, each on its 95 % interval (`measure.uncertainty.rate_ci`, batch means):

- the backlog (sends minus completions a second) grows: its rate's low end times the window is at
  least `MIN_GROWTH_REQUESTS`, and at least `MIN_GROWTH_SHARE` of the arrival rate;
- completions do not catch up: their trend (the least-squares slope of completions a second, in
  req/s per second, with its t interval) at its low end would not close the backlog's growth
  within another window. A backlog that grows while completions rise that fast is an endpoint still
  warming up (or scaling out), not a saturated one.

Pure: fed each second's sends, completions and length.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sm_locust.measure.uncertainty import UNKNOWN, Interval, rate_ci, t_quantile

WINDOW_S = 30
"""The fewest seconds judged: the last ones with open-loop sends at the load under way."""
MAX_WINDOW_S = 120
"""The most: a longer window narrows the intervals (a mild overload is seen later, never on noise)."""
MIN_GROWTH_REQUESTS = 10.0
MIN_GROWTH_SHARE = 0.05


@dataclass(frozen=True)
class Saturation:
    """The window's figures (requests per second) and the verdict."""

    seconds: float
    arrivals: float
    growth: Interval
    """How fast the requests waiting grow (req/s)."""
    completions: float
    """Completions per second over the window."""
    trend: Interval
    """How fast completions per second change (req/s per second)."""

    @property
    def oversaturated(self) -> bool:
        growth, trend = self.growth, self.trend
        if not (growth.known and trend.known):
            return False
        assert growth.low is not None and trend.low is not None  # known
        growing = growth.low * self.seconds >= MIN_GROWTH_REQUESTS and growth.low >= MIN_GROWTH_SHARE * self.arrivals
        catching_up = trend.low * self.seconds >= growth.low
        return growing and not catching_up

    def reason(self) -> str:
        return (f"over-saturated: the requests waiting grew by {_interval(self.growth)} req/s over the last "
                f"{self.seconds:.0f} s at {self.arrivals:.1f} req/s sent, while completions held at "
                f"{self.completions:.1f} req/s (trend {_interval(self.trend, 2)} req/s per s) "
                "(--stop-when-oversaturated)")


def _interval(interval: Interval, digits: int = 1) -> str:
    return f"[{interval.low:.{digits}f}, {interval.high:.{digits}f}]" if interval.known else "[n/a]"


def slope_ci(values: Sequence[float]) -> Interval:
    """95 % interval of the least-squares slope of `values` against their index (Student's t, n - 2 df)."""
    n = len(values)
    if n < 3:
        return UNKNOWN
    mean_x, mean_y = (n - 1) / 2.0, sum(values) / n
    sxx = sum((i - mean_x) ** 2 for i in range(n))
    slope = sum((i - mean_x) * (y - mean_y) for i, y in enumerate(values)) / sxx
    residual = sum((y - mean_y - slope * (i - mean_x)) ** 2 for i, y in enumerate(values))
    half = t_quantile(n - 2) * math.sqrt(residual / (n - 2) / sxx)
    return Interval(slope - half, slope + half)


def judge(sent: Sequence[float], completed: Sequence[float], intervals: Sequence[float]) -> Saturation | None:
    """The verdict on the last `MAX_WINDOW_S` samples (or all of them); None with fewer than `WINDOW_S` (too
    early to tell)."""
    if not len(sent) == len(completed) == len(intervals):
        raise ValueError("sent, completed and intervals must be as long as one another")
    if len(sent) < WINDOW_S:
        return None
    sent, completed, intervals = sent[-MAX_WINDOW_S:], completed[-MAX_WINDOW_S:], intervals[-MAX_WINDOW_S:]
    total_s = float(sum(intervals))
    return Saturation(
        seconds=total_s,
        arrivals=sum(sent) / total_s if total_s > 0 else 0.0,
        growth=rate_ci([s - c for s, c in zip(sent, completed, strict=True)], intervals),
        completions=sum(completed) / total_s if total_s > 0 else 0.0,
        trend=slope_ci([c / d for c, d in zip(completed, intervals, strict=True)]),
    )
