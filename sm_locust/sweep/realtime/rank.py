"""Which real-time configuration wins: eligibility, ranking, the recommendation (pure).

Eligible: it ran, found a sustainable throughput, and there meets the SLO and the error budget.
Ranked by the objective's `optimize`: `cost` (default: the fleet's $ per hour at `target_rps`, then
$ per 1M, then latency; throughput without prices), `throughput`, or `latency`. `recommend` returns
the winner, a sentence with the deciding figure, and why each other lost. Overlapping 95 % intervals
on the deciding figure tie (`sweep/trust.py`): the cheaper per hour is recommended (without prices
the first stays), and the sentence says they tie.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sm_locust.gates.decide import FAIL, INCONCLUSIVE, Bounds, judge, judge_point
from sm_locust.sweep.objective import Objective, nothing_meets, status_reason, why_lost
from sm_locust.sweep.trust import Criterion, as_interval, deciding, rank_by_intervals
from sm_locust.util.formatting import MISSING, money, percent, with_interval


@dataclass
class Candidate:
    """One configuration's figures, as ranking needs them (plain data, filled by the runner)."""

    index: int
    label: str
    status: str = "ok"  # ok | failed | skipped | interrupted
    reason: str | None = None  # why it failed or was skipped
    capacity_rps: float | None = None  # the capacity step's goodput
    knee_rps: float | None = None  # the knee step's own rate, users and percentile
    knee_users: float | None = None
    knee_rps_ci95: list[float] | None = None
    latency_ms: float | None = None  # the objective's percentile at the knee step
    error_rate: float | None = None
    cost_per_1m: float | None = None
    instances_needed: int | None = None
    instances_needed_ci95: list[int] | None = None
    cost_per_hour_at_target: float | None = None
    no_capacity_reason: str | None = None  # the run's own words when no load was acceptable
    capacity_ci95: list[float] | None = None  # 95 % intervals of the deciding figures
    latency_ci95: list[float] | None = None
    cost_per_1m_ci95: list[float] | None = None
    cost_per_hour_at_target_ci95: list[float] | None = None
    price_per_hour: float | None = None  # what running it costs (price x instance count): breaks a tie
    extra: dict[str, object] = field(default_factory=dict)


REPLICATE_FIELDS = (  # (figure, its interval): what a configuration measured twice combines (sweep/replicates.py)
    ("capacity_rps", "capacity_ci95"), ("knee_rps", "knee_rps_ci95"), ("latency_ms", "latency_ci95"),
    ("cost_per_1m", "cost_per_1m_ci95"), ("instances_needed", "instances_needed_ci95"),
    ("cost_per_hour_at_target", "cost_per_hour_at_target_ci95"),
)


@dataclass
class Recommendation:
    winner: Candidate | None
    reason: str
    lost: dict[int, str]  # index -> why it lost
    ranked: list[Candidate]  # eligible, best first
    tied: list[int] = field(default_factory=list)  # indexes of the configurations the winner ties with


def disqualification(c: Candidate, objective: Objective) -> str | None:
    """Why `c` cannot be recommended, or None when it meets the objective."""
    if c.status != "ok":
        return status_reason(c.status, c.reason)
    if not c.capacity_rps:
        return c.no_capacity_reason or "no sustainable throughput found"
    p = objective.percentile_label
    if objective.slo_ms is not None:
        if c.latency_ms is None:
            return f"no {p} measured at the knee"
        verdict = _slo_verdict(c.latency_ms, c.latency_ci95, objective.slo_ms)
        figure = _interval_text(c.latency_ms, c.latency_ci95, " ms")
        if verdict == FAIL:
            return f"{p} {figure} at the knee > SLO {objective.slo_ms:g} ms"
        if verdict == INCONCLUSIVE:
            return (f"{p} {figure} at the knee straddles the SLO {objective.slo_ms:g} ms: undecided "
                    "(measure the knee longer)")
    if c.error_rate is not None and c.error_rate > objective.max_error_rate:
        return (f"error rate {percent(c.error_rate, trim=True)} at the knee > "
                f"{percent(objective.max_error_rate, trim=True)}")
    return None


def _slo_undecided(c: Candidate, objective: Objective) -> bool:
    """`c` ran and would be eligible but for an SLO its percentile's interval straddles."""
    if c.status != "ok" or not c.capacity_rps or objective.slo_ms is None or c.latency_ms is None:
        return False
    if c.error_rate is not None and c.error_rate > objective.max_error_rate:
        return False
    return _slo_verdict(c.latency_ms, c.latency_ci95, objective.slo_ms) == INCONCLUSIVE


def _undecided_tail(winner: Candidate, other: Candidate, order: Sequence[Criterion[Candidate]],
                    objective: Objective) -> str:
    """What the recommendation says of a configuration left out only because its SLO is undecided: it would
    lose anyway when the winner beats it beyond their intervals on the deciding figure, else the choice was
    made without it (it could win if it meets the SLO)."""
    p = objective.percentile_label
    figure = _interval_text(other.latency_ms, other.latency_ci95, " ms")
    head = f" ({other.label}'s {p} {figure} straddles the SLO {objective.slo_ms:g} ms"
    why, _ = deciding(winner, other, order)
    if why is order[0]:
        return f"{head}, but it would lose on {why.name} anyway: {why.text(other)} vs {why.text(winner)})"
    return f"{head}: chosen without it, and it could win should it meet the SLO; measure its knee longer)"


def _slo_verdict(value: float, interval: Sequence[float] | None, slo_ms: float) -> str:
    """The gates' judge of the SLO at the knee: on the 95 % interval when there is one, else the point."""
    if interval is not None and len(interval) == 2:
        return judge(Bounds.of(value, interval[0], interval[1]), slo_ms, upper=True)
    return judge_point(value, slo_ms, upper=True)


def ranking_mode(candidates: Iterable[Candidate], objective: Objective) -> str:
    """The ranking actually used: `cost` needs prices; without them it is `throughput`."""
    if objective.optimize == "cost" and not any(c.cost_per_1m is not None for c in candidates):
        return "throughput"
    return objective.optimize


def _interval_text(value: float | None, interval: object, unit: str = "", dollars: bool = False) -> str:
    """'121 req/s (±6)', '$0.46 [0.43, 0.50]': a deciding figure with its interval (`with_interval`)."""
    if value is None:
        return MISSING
    if isinstance(interval, (list, tuple)) and len(interval) == 2 and interval[0] == interval[1]:
        interval = None  # a fleet of whole instances: the same cost at both bounds is the figure itself
    return "$" + with_interval(value, interval, digits=2) if dollars else with_interval(value, interval, unit)


def criteria(mode: str, objective: Objective) -> list[Criterion[Candidate]]:
    """What the ranking `mode` orders by, most important first (module docstring): measured figures
    with their 95 % intervals (a difference inside them is a tie), then the price to run it (exact)."""
    p = objective.percentile_label
    capacity = Criterion[Candidate]("throughput", lambda c: c.capacity_rps, lambda c: c.capacity_ci95, higher=True,
                                    show=lambda c: _interval_text(c.capacity_rps, c.capacity_ci95, " req/s"))
    latency = Criterion[Candidate](p, lambda c: c.latency_ms, lambda c: c.latency_ci95,
                                   show=lambda c: _interval_text(c.latency_ms, c.latency_ci95, " ms"))
    per_1m = Criterion[Candidate]("$ per 1M", lambda c: c.cost_per_1m, lambda c: c.cost_per_1m_ci95,
                                  show=lambda c: _interval_text(c.cost_per_1m, c.cost_per_1m_ci95, dollars=True))
    price = Criterion[Candidate]("price to run", lambda c: c.price_per_hour,
                                 show=lambda c: f"{money(c.price_per_hour, 3)}/h")
    if mode == "throughput":
        return [capacity, price, latency]
    if mode == "latency":
        return [latency, per_1m, price, capacity]
    if objective.target_rps:
        fleet = Criterion[Candidate](f"$ per hour at {objective.target_rps:g} req/s",
                                     lambda c: c.cost_per_hour_at_target,
                                     lambda c: c.cost_per_hour_at_target_ci95,
                                     show=lambda c: _interval_text(c.cost_per_hour_at_target,
                                                                   c.cost_per_hour_at_target_ci95, dollars=True))
        return [fleet, per_1m, price, latency]
    return [per_1m, price, latency]


def rank(candidates: Sequence[Candidate], objective: Objective) -> list[Candidate]:
    """Eligible candidates, best first: by tiers of ties (`trust.rank_by_intervals`); what ties on
    every figure keeps the higher point estimate of the deciding one, then file order."""
    mode = ranking_mode(candidates, objective)
    eligible = [c for c in candidates if disqualification(c, objective) is None]
    order = criteria(mode, objective)
    return rank_by_intervals(eligible, order, lambda c: (order[0].key(c), c.index))


def _less(a: float | None, b: float | None) -> str:
    """'52 % cheaper' style: how much lower a is than b, in % of b."""
    if a is None or b is None:
        return MISSING
    return f"{(1 - a / b) * 100:.0f} %" if b else "0 %"


def _load(users: float | None) -> str:
    if not isinstance(users, (int, float)):
        return ""
    return f" at {users:g} user{'s' if users != 1 else ''}"


def headline(c: Candidate, objective: Objective) -> str:
    """'max_concurrency 5: 116 req/s at 6 users, p95 44 ms, capacity 121 req/s (±3); 1 instance for 100
    req/s; $0.46 per 1M': the knee step's own rate, users and percentile, then the capacity (its own
    step's) when it differs; never one step's rate beside another's users."""
    rate, interval = (c.knee_rps, c.knee_rps_ci95) if c.knee_rps is not None else (c.capacity_rps, c.capacity_ci95)
    head = f"{c.label}: {with_interval(rate, interval, ' req/s')}{_load(c.knee_users)}"
    if c.latency_ms is not None:
        head += f", {objective.percentile_label} {with_interval(c.latency_ms, c.latency_ci95, ' ms')}"
    if c.capacity_rps is not None and c.knee_rps is not None and abs(c.capacity_rps - c.knee_rps) >= 0.05:
        head += f", capacity {with_interval(c.capacity_rps, c.capacity_ci95, ' req/s')}"
    parts = [head]
    if objective.target_rps and c.instances_needed:
        span = c.instances_needed_ci95  # whole instances: an interval of one count is the figure itself
        span = span if span and span[0] != span[1] else None
        plural = "instance" if c.instances_needed == 1 and span is None else "instances"
        parts.append(f"{with_interval(c.instances_needed, span)} {plural} for {objective.target_rps:g} req/s")
    if c.cost_per_1m is not None:
        parts.append(f"${with_interval(c.cost_per_1m, c.cost_per_1m_ci95, digits=2)} per 1M")
    return "; ".join(parts)


def _versus(winner: Candidate, other: Candidate, mode: str, objective: Objective) -> str:
    """Why `other` ranks below `winner` when the deciding figure itself told them apart (beyond their
    intervals): that figure, each with its interval."""
    figure = deciding_figure(mode, objective)
    if mode == "cost" and objective.target_rps:
        n = other.instances_needed
        return (f"{n} instance{'s' if n != 1 else ''} for {objective.target_rps:g} req/s cost "
                f"{figure.text(other)}/h vs {figure.text(winner)}/h")
    if mode == "cost":
        return f"{figure.text(other)} per 1M vs {figure.text(winner)}"
    prefix = f"{objective.percentile_label} " if mode == "latency" else ""
    return f"{prefix}{figure.text(other)} vs {figure.text(winner)}"


def _comparison(winner: Candidate, runner_up: Candidate, mode: str, objective: Objective) -> str:
    if mode == "throughput":
        gain = (winner.capacity_rps or 0) / (runner_up.capacity_rps or 1) - 1
        return f"{gain * 100:.0f} % more throughput than {runner_up.label}"
    if mode == "latency":
        return (f"{objective.percentile_label} {_less(winner.latency_ms, runner_up.latency_ms)} lower than "
                f"{runner_up.label}")
    if (objective.target_rps and winner.cost_per_hour_at_target is not None and runner_up.cost_per_hour_at_target
            and winner.cost_per_hour_at_target < runner_up.cost_per_hour_at_target):
        return (f"{_less(winner.cost_per_hour_at_target, runner_up.cost_per_hour_at_target)} cheaper at "
                f"{objective.target_rps:g} req/s than {runner_up.label}")
    if winner.cost_per_1m is not None and runner_up.cost_per_1m and winner.cost_per_1m < runner_up.cost_per_1m:
        return f"{_less(winner.cost_per_1m, runner_up.cost_per_1m)} cheaper than {runner_up.label}"
    return f"as cheap as {runner_up.label}, with lower latency"


def deciding_figure(mode: str, objective: Objective) -> Criterion[Candidate]:
    """The figure the ranking `mode` decides on first (see the module docstring)."""
    return criteria(mode, objective)[0]


def _tie(ranked: list[Candidate], mode: str, objective: Objective) -> tuple[list[Candidate], str]:
    """(the configurations tied with the winner on the deciding figure, the sentence's tail)."""
    figure = deciding_figure(mode, objective)
    if not ranked:
        return [], ""
    pick = ranked[0]
    tied = [c for c in ranked[1:] if figure.same(pick, c)]
    if not tied:
        return [], ""
    group = sorted([pick, *tied], key=lambda c: (figure.key(c), c.index))
    figures = " vs ".join(f"{c.label} {figure.text(c)}" for c in group)
    others = ", ".join(c.label for c in tied)
    unknown = [c.label for c in group if figure.interval is not None and as_interval(figure.interval(c)) is None]
    told = (f"no 95 % interval for {', '.join(unknown)}, so the measurement cannot order them" if unknown
            else "95 % intervals overlap")
    head = f"; it TIES with {others} on {figure.name} ({told}: {figures})"
    order = criteria(mode, objective)
    decided = [(c, deciding(pick, c, order)[0]) for c in tied]
    why, first = decided[0][1], tied[0]
    # the tied it beats on a later figure than the first tied one, named with that figure (else "they tie on
    # every figure" would cover configurations the price or another figure does tell apart)
    beyond = [(c, w) for c, w in decided[1:] if w is not None and (why is None or w.name != why.name)]
    tail = "".join(f"; {w.name} puts it ahead of {c.label} ({w.text(pick)} vs {w.text(c)})" for c, w in beyond)
    if why is not None and why.name == "price to run":
        prices = " vs ".join(f"{money(c.price_per_hour, 3)}/h" for c in [pick, *tied])
        return tied, f"{head}: the cheaper to run is recommended ({prices}){tail}"
    if why is not None:
        versus = f"{pick.label} {why.text(pick)} vs {first.label} {why.text(first)}"
        return tied, f"{head}: {why.name} decides ({versus}){tail}"
    if all(c.price_per_hour is None for c in group):
        return tied, f"{head}, and no price tells the cheaper: the higher point estimate is kept{tail}"
    if not beyond:
        return tied, f"{head}, and they tie on every figure: the higher point estimate is kept"
    even = ", ".join(c.label for c, w in decided if w is None)
    return tied, f"{head}; with {even} it ties on every figure: the higher point estimate is kept{tail}"


def recommend(candidates: Sequence[Candidate], objective: Objective) -> Recommendation:
    """The winner, its one-sentence reason, and why each other configuration lost."""
    mode = ranking_mode(candidates, objective)
    ranked = rank(candidates, objective)
    tied, tie_text = _tie(ranked, mode, objective)
    order = criteria(mode, objective)

    def versus(winner: Candidate, other: Candidate) -> str:
        why, same = deciding(winner, other, order)
        if why is order[0]:
            return _versus(winner, other, mode, objective)
        names = " and ".join(c.name for c in same) or order[0].name
        if why is None:
            return (f"ties with {winner.label} on {names}; " + ("no price tells them apart: the higher point was kept"
                                                                if winner.price_per_hour is None else "listed later"))
        if why.name == "price to run":
            return f"ties with {winner.label} on {names}; {winner.label} costs less to run"
        return f"ties with {winner.label} on {names}; {why.name} {why.text(other)} vs {why.text(winner)}"

    lost = why_lost(candidates, ranked, lambda c: disqualification(c, objective), versus)
    if not ranked:
        return Recommendation(None, nothing_meets("configuration", candidates, lost), lost, [])
    winner = ranked[0]
    sentence = headline(winner, objective)
    if len(ranked) > 1 and not tie_text:
        sentence += f" — {_comparison(winner, ranked[1], mode, objective)}"
    undecided = [c for c in candidates if c not in ranked and _slo_undecided(c, objective)]
    if len(ranked) == 1 and len(candidates) > 1:
        sentence += f" — the only configuration {'known to meet' if undecided else 'that meets'} the objective"
    sentence += tie_text
    sentence += "".join(_undecided_tail(winner, c, order, objective) for c in undecided)
    if mode != objective.optimize:
        sentence += " (no prices known: ranked by throughput)"
    return Recommendation(winner, sentence, lost, ranked, [c.index for c in tied])
