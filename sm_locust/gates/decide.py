"""A gate's three answers (pass, fail, inconclusive) from a figure, its 95 % interval and a limit,
and how much longer a run would have decided an undecided one (pure arithmetic).

An interval wholly on one side of the limit decides the gate; one that straddles it is INCONCLUSIVE.
The interval comes from summary.json (`totals.ci95`); a figure without one is judged on its point
and the line says so. How much longer: a stationary run's half-width shrinks as 1 / sqrt(duration),
so T' = T x (reach / distance)^2, an estimate that errs long (Locust's buckets bound a percentile's
interval). docs/gates.md shows the line; docs/facts.md has the sources.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"
STATUSES = (PASS, FAIL, INCONCLUSIVE)
WORDS = {PASS: "PASS", FAIL: "FAIL", INCONCLUSIVE: "INCONCLUSIVE"}
MAX_FACTOR = 100.0  # beyond 100x the run's length the figure is, in practice, at the limit


@dataclass(frozen=True)
class Bounds:
    """A figure's point value and its 95 % interval, the interval widened to hold the point (a
    bootstrap interval of a bucketed percentile can miss it by a bucket)."""

    value: float
    low: float
    high: float

    @classmethod
    def of(cls, value: float, low: float, high: float) -> Bounds:
        return cls(float(value), min(float(low), float(value)), max(float(high), float(value)))


def judge(bounds: Bounds, limit: float, *, upper: bool) -> str:
    """PASS when the whole interval is on the allowed side of `limit`, FAIL when the whole interval
    is past it, else INCONCLUSIVE. `upper`: the figure must be at most `limit` (a latency); else at
    least `limit` (a throughput). A bound equal to the limit is on the allowed side."""
    if upper:
        if bounds.high <= limit:
            return PASS
        if bounds.low > limit:
            return FAIL
    else:
        if bounds.low >= limit:
            return PASS
        if bounds.high < limit:
            return FAIL
    return INCONCLUSIVE


def judge_point(value: float, limit: float, *, upper: bool) -> str:
    """PASS or FAIL on the point value alone (a figure with no interval recorded)."""
    return PASS if (value <= limit if upper else value >= limit) else FAIL


def reach_toward(bounds: Bounds, limit: float) -> float:
    """How far the interval reaches from the point toward `limit` (the half-width on that side)."""
    return bounds.high - bounds.value if limit >= bounds.value else bounds.value - bounds.low


def longer_run_factor(bounds: Bounds, limit: float) -> float | None:
    """How many times this run's length would decide the gate if the figure stayed where it is
    ((reach / distance)^2, at least 1); None when the point sits on the limit (no length decides it)."""
    distance = abs(limit - bounds.value)
    if distance <= 0.0:
        return None
    reach = reach_toward(bounds, limit)
    return max(1.0, (reach / distance) ** 2)


def longer_run_factor_split(distance: float, reach: float, var_fixed: float, var_scaled: float) -> float | None:
    """As `longer_run_factor` when only part of the interval's variance shrinks with the run: a
    comparison with a baseline, whose own run (`var_fixed`) is over, against this run (`var_scaled`).
    The interval's quantile factor k = reach / sqrt(var_fixed + var_scaled) is kept; the run is long
    enough when k x sqrt(var_fixed + var_scaled / f) <= distance. None when no length of this run is
    enough (the baseline's own interval already reaches past the limit) or the point is on it."""
    total = var_fixed + var_scaled
    if distance <= 0.0 or total <= 0.0 or var_scaled <= 0.0:
        return None
    k = reach / math.sqrt(total)
    room = (distance / k) ** 2 - var_fixed if k > 0 else math.inf
    if room <= 0.0:
        return None
    return max(1.0, var_scaled / room)


def longer_run_text(factor: float | None, duration_s: float | None, *, baseline: bool = False) -> str:
    """'a run of about 1 min (4x this one) would decide it, if the figure stays where it is', or why none would."""
    if factor is None:
        if baseline:
            return "only a longer baseline would decide it (its own interval reaches past the limit)"
        return "no run length decides it: the figure sits on the limit"
    if factor > MAX_FACTOR:
        return f"only a run over {MAX_FACTOR:g}x this one would decide it: the figure is at the limit in practice"
    times = f"{math.ceil(factor * 10) / 10:g}x this one"
    if duration_s:
        return f"a run of about {_span(duration_s * factor)} ({times}) would decide it, if the figure stays where it is"
    return f"a run about {times} would decide it, if the figure stays where it is"


def _span(seconds: float) -> str:
    """Whole seconds under 2 minutes, else minutes (rounded up: it is a minimum)."""
    if seconds < 120:
        return f"{math.ceil(seconds)} s"
    return f"{math.ceil(seconds / 60)} min"
