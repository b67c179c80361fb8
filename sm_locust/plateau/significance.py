"""Decisions on intervals, not points: whether a step's figures already decide what they must decide.

Three decisions per step (throughput stopped growing, a percentile meets its SLO, goodput known well
enough to be the capacity) are taken on the figure's 95 % interval (`measure.uncertainty`): an
interval that straddles its line decides nothing yet, the driver keeps the step running, and what
is undecided at the budget makes the verdict INCONCLUSIVE with the reason (docs/plateau.md,
"Deciding on intervals"). Pure; a figure without an interval is judged on its point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sm_locust.measure.uncertainty import UNKNOWN, Interval

ABOVE = "above"
BELOW = "below"
UNDECIDED = "undecided"

MIN_TAIL = 1  # a percentile is estimated only from a window with at least one sample beyond it ...
MIN_COUNT = 10  # ... and never from fewer than this many


def min_count(pct: float) -> int:
    """The fewest samples a `pct` percentile is estimated from: `MIN_TAIL` of them beyond it, at least
    `MIN_COUNT` (p50: 10, p95: 20, p99: 100). Fewer, and the "percentile" is the window's maximum,
    which the bootstrap cannot widen past: its interval would claim what the data cannot show."""
    return max(MIN_COUNT, math.ceil(MIN_TAIL / (1.0 - pct / 100.0) - 1e-9))


def relative_half_width(value: float, interval: Interval) -> float | None:
    """The interval's half-width as a fraction of `value` (None when unknown or `value` <= 0)."""
    half = interval.half_width
    if half is None or not value > 0:
        return None
    return half / value


def precise(value: float, interval: Interval, tolerance: float) -> bool:
    """The figure is known to within +-`tolerance` of itself (an unknown interval is not)."""
    width = relative_half_width(value, interval)
    return width is not None and width <= tolerance + 1e-12


def side(interval: Interval, limit: float) -> str:
    """Where the figure lies against `limit`, from its interval: ABOVE (low > limit), BELOW
    (high <= limit) or UNDECIDED (it straddles the limit, or is unknown)."""
    if interval.low is None or interval.high is None:
        return UNDECIDED
    if interval.low > limit:
        return ABOVE
    if interval.high <= limit:
        return BELOW
    return UNDECIDED


def growth_interval(new: float, new_ci: Interval, base: float, base_ci: Interval) -> Interval:
    """95 % interval of the growth new / base - 1 from the two figures' own intervals (independent
    windows; the delta method: relative half-widths add in quadrature). Unknown when either is."""
    a, b = relative_half_width(new, new_ci), relative_half_width(base, base_ci)
    if a is None or b is None or not base > 0:
        return UNKNOWN
    ratio = new / base
    half = ratio * math.sqrt(a * a + b * b)
    return Interval(ratio - 1.0 - half, ratio - 1.0 + half)


@dataclass(frozen=True)
class Support:
    """What summary.json's `plateau` adds about how far the measurement supports the verdict: the
    knee's goodput interval, the knee's interval in loads (against the capacity's interval), the
    decisions left unsupported (each with its reason; not empty = INCONCLUSIVE), those left open
    that only place the knee within its interval in loads (`knee_undecided`: said, not INCONCLUSIVE),
    and the resolution the search placed the knee to (`knee_granule`, in loads: knees of two runs
    within one granule of each other are the same knee)."""

    knee_ci95: Interval = UNKNOWN
    knee_loads: tuple[float, float] | None = None
    undecided: tuple[str, ...] = ()
    knee_undecided: tuple[str, ...] = ()
    knee_granule: float | None = None

    def to_json(self) -> dict:
        return {"knee_ci95": self.knee_ci95.as_list(),
                "knee_loads": list(self.knee_loads) if self.knee_loads else None,
                "undecided": list(self.undecided),
                "knee_undecided": list(self.knee_undecided),
                "knee_granule": self.knee_granule}

