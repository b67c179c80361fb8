"""Which serverless configuration to recommend, and why the others lost (pure).

Eligible: it ran, its warm latency is known, and it meets the objective (warm percentile under
`slo_ms`, throttle rate at MaxConcurrency callers within `max_error_rate`, goodput >= `target_rps`).
Ranked by `trust.rank_by_intervals` (overlapping 95 % intervals tie): $ per 1M, then warm latency,
then MaxConcurrency (more goodput without a target; the smallest that meets it with one), then cold
start, then file order. The sentence names the figures the winner tied on and the one that decided
(docs/serverless.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from sm_locust.measure.steady import DEFAULT_SLO_PERCENTILE
from sm_locust.record.model import percentile_key
from sm_locust.sweep.objective import Objective, nothing_meets, why_lost
from sm_locust.sweep.replicates import combine, merged
from sm_locust.sweep.trust import Criterion, deciding, rank_by_intervals, tie_note
from sm_locust.util.formatting import MISSING, percent, with_interval

if TYPE_CHECKING:
    from sm_locust.sweep.serverless.spec import CompareInstance

WARM_KEYS = {p: percentile_key(p, "warm_") for p in (50.0, 95.0, 99.0)}


@dataclass
class ServerlessCandidate:
    index: int
    label: str
    memory_mb: int
    max_concurrency: int
    status: str = "ok"
    reason: str | None = None
    warm_ms: dict[float, float | None] = field(default_factory=dict)  # percentile -> warm latency
    throttle_at_1: float | None = None  # throttle rate with MaxConcurrency callers
    capacity_rps: float | None = None  # best goodput of the concurrency test
    cold_start_p50_ms: float | None = None
    cost_per_1m: float | None = None
    break_even_rps: float | None = None
    break_even_requests_per_month: float | None = None
    warm_ci95: dict[float, list[float] | None] = field(default_factory=dict)  # percentile -> its 95 % interval
    capacity_ci95: list[float] | None = None
    cold_start_p50_ci95: list[float] | None = None
    cost_per_1m_ci95: list[float] | None = None

    @property
    def warm_p95_ms(self) -> float | None:
        return self.warm_ms.get(DEFAULT_SLO_PERCENTILE)


def replicated(first: ServerlessCandidate, second: ServerlessCandidate) -> ServerlessCandidate:
    """A configuration measured twice, standing for both replicates (`replicates.combine`: the mean, the
    hull of the intervals); the throttle rate is the worse of the two."""
    out = merged(first, second, (("capacity_rps", "capacity_ci95"), ("cold_start_p50_ms", "cold_start_p50_ci95"),
                                 ("cost_per_1m", "cost_per_1m_ci95")))
    warm: dict[float, float | None] = {}
    warm_ci: dict[float, list[float] | None] = {}
    for p in sorted(set(first.warm_ms) | set(second.warm_ms)):
        warm[p], warm_ci[p] = combine(first.warm_ms.get(p), first.warm_ci95.get(p), second.warm_ms.get(p),
                                      second.warm_ci95.get(p))
    throttles = [t for t in (first.throttle_at_1, second.throttle_at_1) if t is not None]
    return replace(out, warm_ms=warm, warm_ci95=warm_ci, throttle_at_1=max(throttles) if throttles else None)


@dataclass
class ServerlessRecommendation:
    winner: ServerlessCandidate | None
    reason: str
    lost: dict[int, str]
    ranked: list[ServerlessCandidate]
    tied: list[int] = field(default_factory=list)  # indexes of the configurations the winner ties with


def _seconds(ms: float | None) -> str:
    if ms is None:
        return MISSING
    return f"{ms / 1000:.1f} s" if ms >= 1000 else f"{ms / 1000:.2f} s"


def _millions(n: float | None) -> str:
    if n is None:
        return MISSING
    return f"{n / 1e6:.1f}M" if n >= 1e5 else f"{n:,.0f}"


def disqualification(c: ServerlessCandidate, objective: Objective) -> str | None:
    if c.status != "ok":
        return f"{c.status}: {c.reason}" if c.reason else c.status
    p = objective.percentile
    warm = c.warm_ms.get(p) if p in WARM_KEYS else c.warm_ms.get(DEFAULT_SLO_PERCENTILE)
    label = f"p{p:g}" if p in WARM_KEYS else "p95"
    if c.warm_p95_ms is None:
        return "no warm latency measured (the stability test did not run or recorded no requests)"
    if objective.slo_ms is not None and warm is not None and warm > objective.slo_ms:
        return f"{label} {warm:.0f} ms warm > SLO {objective.slo_ms:g} ms"
    if c.throttle_at_1 is not None and c.throttle_at_1 > objective.max_error_rate:
        return (f"{percent(c.throttle_at_1, trim=True)} throttled with {c.max_concurrency} callers (MaxConcurrency) > "
                f"{percent(objective.max_error_rate, trim=True)}")
    if objective.target_rps:
        if c.capacity_rps is None:
            return f"no goodput measured to hold against the target {objective.target_rps:g} req/s"
        if c.capacity_rps < objective.target_rps:
            return f"serves at most {c.capacity_rps:.1f} req/s < target {objective.target_rps:g} req/s"
    return None


def _warm_percentile(objective: Objective) -> float:
    return objective.percentile if objective.percentile in WARM_KEYS else DEFAULT_SLO_PERCENTILE


def _label(c: ServerlessCandidate) -> str:
    return f"{c.memory_mb} MB, MaxConcurrency {c.max_concurrency}"


def criteria(objective: Objective) -> list[Criterion[ServerlessCandidate]]:
    """What the ranking orders by, most important first (module docstring)."""
    p = _warm_percentile(objective)
    cost = Criterion[ServerlessCandidate](
        "$ per 1M", lambda c: c.cost_per_1m, lambda c: c.cost_per_1m_ci95,
        show=lambda c: "$" + with_interval(c.cost_per_1m, c.cost_per_1m_ci95, digits=2))
    warm = Criterion[ServerlessCandidate](
        f"warm p{p:g}", lambda c: c.warm_ms.get(p), lambda c: c.warm_ci95.get(p),
        show=lambda c: with_interval(c.warm_ms.get(p), c.warm_ci95.get(p), " ms"))
    cold = Criterion[ServerlessCandidate](
        "cold start p50", lambda c: c.cold_start_p50_ms, lambda c: c.cold_start_p50_ci95,
        show=lambda c: with_interval(c.cold_start_p50_ms, c.cold_start_p50_ci95, " ms"))
    if objective.target_rps:
        concurrency = Criterion[ServerlessCandidate]("MaxConcurrency", lambda c: float(c.max_concurrency),
                                                     show=lambda c: f"{c.max_concurrency}")
        return [cost, warm, concurrency, cold]
    served = Criterion[ServerlessCandidate](
        "goodput", lambda c: c.capacity_rps, lambda c: c.capacity_ci95, higher=True,
        show=lambda c: with_interval(c.capacity_rps, c.capacity_ci95, " req/s", 1))
    return [cost, warm, served, cold]


def rank(candidates: Sequence[ServerlessCandidate], objective: Objective) -> list[ServerlessCandidate]:
    """Eligible candidates, best first (the rules in the module docstring)."""
    eligible = [c for c in candidates if disqualification(c, objective) is None]
    return rank_by_intervals(eligible, criteria(objective), lambda c: c.index)


def _versus(winner: ServerlessCandidate, other: ServerlessCandidate, objective: Objective) -> str:
    """Why `other` ranks below `winner`: the figures they tie on, and the one that decided."""
    why, same = deciding(winner, other, criteria(objective))
    tied = f"ties with {_label(winner)} on {' and '.join(c.name for c in same)}; " if same else ""
    if why is None:
        return tied + "as good on every figure; listed later"
    if why.name == "MaxConcurrency":
        return (f"{tied}MaxConcurrency {winner.max_concurrency} already serves {objective.target_rps:g} req/s "
                f"(this one takes {other.max_concurrency} of the region's concurrency quota)")
    if why.name == "goodput":
        return (f"{tied}serves at most {why.text(other)} vs {why.text(winner)} "
                f"(MaxConcurrency {other.max_concurrency} vs {winner.max_concurrency})")
    return f"{tied}{why.name} {why.text(other)} vs {why.text(winner)}"


def _tie_tail(ranked: Sequence[ServerlessCandidate], objective: Objective) -> tuple[list[ServerlessCandidate], str]:
    """(the configurations the winner tied with on the first figure, the sentence's tail naming the figures
    it tied the runner-up on and the one that decided)."""
    if len(ranked) < 2:
        return [], ""
    order = criteria(objective)
    winner = ranked[0]
    tied = [c for c in ranked[1:] if order[0].same(winner, c)]
    runner_up = ranked[1]
    why, same = deciding(winner, runner_up, order)
    if not same:
        return tied, ""
    note = tie_note(winner, runner_up, same, _label)
    if why is None:
        return tied, f"; {note}, and on every other figure: the first listed is recommended"
    return tied, f"; {note}: {why.name} decides ({why.text(winner)} vs {why.text(runner_up)})"


def headline(c: ServerlessCandidate, objective: Objective, compare: CompareInstance | None) -> str:
    """'serverless 4096 MB, MaxConcurrency 8: p95 61 ms warm, cold starts 0.8 s, $4.97 per 1M; real-time
    ml.c5.large is cheaper above 9.7 req/s sustained (25.5M requests a month)'."""
    p = _warm_percentile(objective)
    warm = c.warm_ms.get(p)
    parts = [f"serverless {c.memory_mb} MB, MaxConcurrency {c.max_concurrency}: "
             + (f"p{p:g} {with_interval(warm, c.warm_ci95.get(p), ' ms')} warm" if warm is not None
                else "warm latency unknown")]
    if c.capacity_rps is not None:
        parts.append(f"serves {with_interval(c.capacity_rps, c.capacity_ci95, ' req/s', 1)}")
    if c.cold_start_p50_ms is not None:
        parts.append(f"cold starts {_seconds(c.cold_start_p50_ms)}")
    if c.cost_per_1m is not None:
        parts.append(f"${with_interval(c.cost_per_1m, c.cost_per_1m_ci95, digits=2)} per 1M")
    text = ", ".join(parts)
    if compare is not None and c.cost_per_1m is not None:
        if c.break_even_rps is not None:
            text += (f"; real-time {compare.name} is cheaper above {c.break_even_rps:.1f} req/s sustained "
                     f"({_millions(c.break_even_requests_per_month)} requests a month)")
            if c.capacity_rps is not None and c.capacity_rps < c.break_even_rps:
                text += f"; this configuration served at most {c.capacity_rps:.1f} req/s"
        else:
            text += f"; serverless stays cheaper than real-time {compare.name} at any rate one instance serves"
    return text


def recommend(candidates: Sequence[ServerlessCandidate], objective: Objective,
              compare: CompareInstance | None = None) -> ServerlessRecommendation:
    ranked = rank(candidates, objective)
    lost = why_lost(candidates, ranked, lambda c: disqualification(c, objective),
                    lambda winner, other: _versus(winner, other, objective))
    if not ranked:
        return ServerlessRecommendation(None, nothing_meets("serverless configuration", candidates, lost), lost, [])
    tied, tail = _tie_tail(ranked, objective)
    return ServerlessRecommendation(ranked[0], headline(ranked[0], objective, compare) + tail, lost, ranked,
                                    [c.index for c in tied])
