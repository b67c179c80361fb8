"""Which async configuration wins: eligibility, ranking, the recommendation (pure).

Eligible: it ran, its search was conclusive (an INCONCLUSIVE one is never recommended), it found a
capacity (a rate whose backlog stayed bounded and whose time to result kept the SLO), that capacity is
at least the objective's `target_rps` when given, and its failures are within the error budget.
Ranked by `optimize`: `cost` (the default: $ per 1M inferences from instance-hours, then the price to
run, then the time to result; with `target_rps`, the price to run first: every eligible configuration
serves the target; without prices, instance-hours per 1M and the instance count), `throughput` (the
capacity, then the price to run) or `latency` (the time to result at the capacity, then $ per 1M).
Every measured figure is compared by its interval (`sweep/trust.py`): the capacity by the search's
bracket, whose upper end is open (the rate that stopped the search is not within the capacity), so a
capacity equal to another configuration's stopping rate is told apart; a difference inside the
intervals is a tie, broken by the next figure (the price to run is exact), and the sentence says so.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from sm_locust.sweep.objective import Objective, nothing_meets, status_reason, why_lost
from sm_locust.sweep.trust import Criterion, as_interval, deciding, rank_by_intervals
from sm_locust.util.formatting import MISSING, money, number, percent, with_interval

Bounds = list[float | None] | None  # [low, high]; a None end is unknown (a bracket without a top)


@dataclass
class AsyncCandidate:
    """One configuration's figures, as ranking needs them (plain data, filled by the sweep)."""

    index: int
    label: str
    status: str = "ok"
    reason: str | None = None
    instance_count: int = 1
    workers: int = 1  # MaxConcurrentInvocationsPerInstance
    capacity_rps: float | None = None
    capacity_ci95: Bounds = None  # the search's bracket: [capacity, the rate that stopped it (open) or None]
    time_to_result_ms: float | None = None  # the objective's percentile at the capacity step
    time_to_result_ci95: list[float] | None = None
    instance_hours_per_1m: float | None = None
    instance_hours_per_1m_ci95: Bounds = None
    cost_per_1m: float | None = None
    cost_per_1m_ci95: Bounds = None
    fleet_per_hour: float | None = None  # price x instances: what running it costs (exact)
    error_rate: float | None = None
    inconclusive: bool = False
    inconclusive_reason: str | None = None
    no_capacity_reason: str | None = None


@dataclass
class AsyncRecommendation:
    winner: AsyncCandidate | None
    reason: str
    lost: dict[int, str]
    ranked: list[AsyncCandidate]
    tied: list[int] = field(default_factory=list)


def disqualification(c: AsyncCandidate, objective: Objective) -> str | None:
    """Why `c` cannot be recommended, or None when it meets the objective."""
    if c.status != "ok":
        return status_reason(c.status, c.reason)
    if c.inconclusive:
        return f"INCONCLUSIVE: {c.inconclusive_reason or 'the async search could not decide'}; never recommended"
    if not c.capacity_rps:
        return c.no_capacity_reason or "no rate kept the time-to-result SLO with a bounded backlog"
    if objective.target_rps and c.capacity_rps < objective.target_rps:
        return f"capacity {c.capacity_rps:g} req/s < target {objective.target_rps:g} req/s"
    if c.error_rate is not None and c.error_rate > objective.max_error_rate:
        return (f"error rate {percent(c.error_rate, trim=True)} of the calls accepted > "
                f"{percent(objective.max_error_rate, trim=True)}")
    return None


def open_top(bounds: Bounds) -> list[float] | None:
    """A bracket [low, high) as a closed interval for `trust.overlap`: just below its high end (an open end),
    the largest float when it has none (a lower bound)."""
    if not isinstance(bounds, (list, tuple)) or len(bounds) != 2 or bounds[0] is None:
        return None
    low, high = float(bounds[0]), bounds[1]
    return [low, sys.float_info.max if high is None else max(low, math.nextafter(float(high), -math.inf))]


def open_bottom(bounds: Bounds) -> list[float] | None:
    """A [low, high] whose low end is open (a cost from the bracket's open top), as a closed interval."""
    if not isinstance(bounds, (list, tuple)) or len(bounds) != 2 or None in bounds:
        return None
    low, high = float(bounds[0]), float(bounds[1])  # type: ignore[arg-type]
    return [min(high, math.nextafter(low, math.inf)) if low > 0 else low, high]


def bracket_text(value: float | None, bounds: Bounds, unit: str = " req/s") -> str:
    """'6 req/s [6, 9)': the capacity and its bracket; '30 req/s [30, ...)' when the search never stopped."""
    if value is None:
        return MISSING
    if not isinstance(bounds, (list, tuple)) or len(bounds) != 2:
        return f"{value:g}{unit}"
    top = "..." if bounds[1] is None else f"{bounds[1]:g}"
    return f"{value:g}{unit} [{value:g}, {top})"


def _cost_text(value: float | None, bounds: Bounds, dollars: bool) -> str:
    interval = None if not isinstance(bounds, (list, tuple)) or None in bounds else bounds
    text = with_interval(value, interval, digits=2 if dollars else 3)
    return MISSING if value is None else ("$" + text if dollars else f"{text} instance-hours")


def criteria(objective: Objective, candidates: Sequence[AsyncCandidate]) -> list[Criterion[AsyncCandidate]]:
    """What `optimize` orders by, most important first (module doc)."""
    p = objective.percentile_label
    priced = any(c.cost_per_1m is not None for c in candidates)
    capacity = Criterion[AsyncCandidate]("capacity", lambda c: c.capacity_rps, lambda c: open_top(c.capacity_ci95),
                                         higher=True, show=lambda c: bracket_text(c.capacity_rps, c.capacity_ci95))
    ttr = Criterion[AsyncCandidate](f"{p} time to result", lambda c: c.time_to_result_ms,
                                    lambda c: c.time_to_result_ci95,
                                    show=lambda c: with_interval(c.time_to_result_ms, c.time_to_result_ci95, " ms"))
    if priced:
        per_1m = Criterion[AsyncCandidate]("$ per 1M", lambda c: c.cost_per_1m,
                                           lambda c: open_bottom(c.cost_per_1m_ci95),
                                           show=lambda c: _cost_text(c.cost_per_1m, c.cost_per_1m_ci95, True))
        fleet = Criterion[AsyncCandidate]("price to run", lambda c: c.fleet_per_hour,
                                          show=lambda c: f"{money(c.fleet_per_hour, 3)}/h")
    else:
        per_1m = Criterion[AsyncCandidate]("instance-hours per 1M", lambda c: c.instance_hours_per_1m,
                                           lambda c: open_bottom(c.instance_hours_per_1m_ci95),
                                           show=lambda c: _cost_text(c.instance_hours_per_1m,
                                                                     c.instance_hours_per_1m_ci95, False))
        fleet = Criterion[AsyncCandidate]("instances", lambda c: float(c.instance_count),
                                          show=lambda c: f"{c.instance_count} instance{'s' * (c.instance_count != 1)}")
    if objective.optimize == "throughput":
        return [capacity, fleet, ttr]
    if objective.optimize == "latency":
        return [ttr, per_1m, fleet]
    if objective.target_rps:
        return [fleet, per_1m, ttr]
    return [per_1m, fleet, ttr]


def rank(candidates: Sequence[AsyncCandidate], objective: Objective) -> list[AsyncCandidate]:
    """Eligible candidates, best first, by tiers of ties (`trust.rank_by_intervals`)."""
    order = criteria(objective, candidates)
    eligible = [c for c in candidates if disqualification(c, objective) is None]
    return rank_by_intervals(eligible, order, lambda c: (order[0].key(c), c.index))


def headline(c: AsyncCandidate, objective: Objective) -> str:
    """'instance_count 2, max_concurrent_invocations_per_instance 2: capacity 12 req/s [12, 15), p95 time to
    result 640 ms [600, 700] (SLO 2000 ms); 2 instances x 2 workers; $1.23 [0.98, 1.23] per 1M (5.1 instance-hours)'."""
    head = (f"{c.label}: capacity {bracket_text(c.capacity_rps, c.capacity_ci95)}, {objective.percentile_label} "
            f"time to result {with_interval(c.time_to_result_ms, c.time_to_result_ci95, ' ms')} "
            f"(SLO {objective.slo_ms:g} ms)")
    parts = [head, f"{c.instance_count} instance{'s' * (c.instance_count != 1)} x {c.workers} "
                   f"worker{'s' * (c.workers != 1)}"]
    if c.cost_per_1m is not None:
        parts.append(f"{_cost_text(c.cost_per_1m, c.cost_per_1m_ci95, True)} per 1M "
                     f"({number(c.instance_hours_per_1m, 2)} instance-hours)")
    elif c.instance_hours_per_1m is not None:
        parts.append(f"{_cost_text(c.instance_hours_per_1m, c.instance_hours_per_1m_ci95, False)} per 1M")
    return "; ".join(parts)


def _tie_tail(winner: AsyncCandidate, tied: list[AsyncCandidate], order: list[Criterion[AsyncCandidate]]) -> str:
    """'; it TIES with b on $ per 1M (intervals overlap: ...): the cheaper to run is recommended (...)'."""
    first = order[0]
    unknown = [c.label for c in [winner, *tied] if first.interval is not None and
               as_interval(first.interval(c)) is None]
    told = (f"no interval for {', '.join(unknown)}, so the measurement cannot order them" if unknown
            else "their intervals overlap")
    figures = " vs ".join(f"{c.label} {first.text(c)}" for c in [winner, *tied])
    head = f"; it TIES with {', '.join(c.label for c in tied)} on {first.name} ({told}: {figures})"
    why = deciding(winner, tied[0], order)[0]
    if why is None:
        return f"{head}, and they tie on every figure: the higher point estimate is kept"
    versus = f"{winner.label} {why.text(winner)} vs {tied[0].label} {why.text(tied[0])}"
    if why.interval is None:
        return f"{head}: the cheaper to run is recommended ({versus})"
    return f"{head}: {why.name} decides ({versus})"


def recommend(candidates: Sequence[AsyncCandidate], objective: Objective) -> AsyncRecommendation:
    """The winner, its one-sentence reason, and why each other configuration lost."""
    order = criteria(objective, candidates)
    ranked = rank(candidates, objective)

    def versus(winner: AsyncCandidate, other: AsyncCandidate) -> str:
        why, same = deciding(winner, other, order)
        if why is order[0]:
            return f"{why.name} {why.text(other)} vs {why.text(winner)} ({winner.label})"
        names = " and ".join(c.name for c in same) or order[0].name
        if why is None:
            return f"ties with {winner.label} on {names}; the higher point estimate was kept"
        if why.interval is None:
            return f"ties with {winner.label} on {names}; {winner.label} costs less to run ({why.text(winner)} vs " \
                   f"{why.text(other)})"
        return f"ties with {winner.label} on {names}; {why.name} {why.text(other)} vs {why.text(winner)}"

    lost = why_lost(candidates, ranked, lambda c: disqualification(c, objective), versus)
    if not ranked:
        return AsyncRecommendation(None, nothing_meets("configuration", candidates, lost), lost, [])
    winner = ranked[0]
    sentence = headline(winner, objective)
    tied = [c for c in ranked[1:] if order[0].same(winner, c)]
    undecided = [c.label for c in candidates if c.inconclusive]
    if tied:
        sentence += _tie_tail(winner, tied, order)
    elif len(ranked) > 1:
        runner_up = ranked[1]
        sentence += (f" — {order[0].name} {order[0].text(winner)} vs {order[0].text(runner_up)} "
                     f"({runner_up.label})")
    elif len(candidates) > 1:  # "known to": an INCONCLUSIVE configuration might meet it too
        sentence += f" — the only configuration {'known to meet' if undecided else 'that meets'} the objective"
    if undecided:
        sentence += (f" (chosen without {', '.join(undecided)}: INCONCLUSIVE, a step above the capacity its search "
                     "could not decide; measure it with longer steps)")
    return AsyncRecommendation(winner, sentence, lost, ranked, [c.index for c in tied])
