"""Which serverless configuration to recommend, and why the others lost (pure).

Eligible: the configuration ran; its warm latency is known; it meets the objective when one is
given: the objective's percentile of *warm* latency at or under `slo_ms`, the throttle rate with
MaxConcurrency callers (multiplier 1, or the largest multiplier under it) within `max_error_rate`,
and, with `target_rps`, a measured goodput of at least that.

Ranking, as seed 003 chooses (the cheapest memory size that performs, then the MaxConcurrency that
handles the traffic):

1. **cost**: configurations within `COST_TIE` (5 %) of the cheapest $ per 1M count as equally
   cheap: with CPU proportional to memory, a size twice as large runs about twice as fast and costs
   about the same per request, and measurement noise must not decide;
2. **warm latency** among those: within `LATENCY_TIE` (10 %) of the best count as equal;
3. **MaxConcurrency**: it costs nothing, so without a `target_rps` the configuration that serves
   more (higher goodput) wins; with a target, the smallest MaxConcurrency that meets it (account
   quota is shared by every serverless endpoint in the region);
4. then the faster cold start, then file order.

The sentence: "serverless 4096 MB, MaxConcurrency 8: p95 61 ms warm, cold starts 0.8 s, $4.97 per
1M; real-time ml.c5.large is cheaper above 9.7 req/s sustained (25.5M requests a month)".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sm_locust.plateau.steady import DEFAULT_SLO_PERCENTILE
from sm_locust.record.model import percentile_key
from sm_locust.sweep.objective import Objective, big, nothing_meets, why_lost
from sm_locust.util.formatting import MISSING, percent

COST_TIE = 0.05
LATENCY_TIE = 0.10
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

    @property
    def warm_p95_ms(self) -> float | None:
        return self.warm_ms.get(DEFAULT_SLO_PERCENTILE)


@dataclass
class ServerlessRecommendation:
    winner: ServerlessCandidate | None
    reason: str
    lost: dict[int, str]
    ranked: list[ServerlessCandidate]


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


def rank(candidates: Sequence[ServerlessCandidate], objective: Objective) -> list[ServerlessCandidate]:
    """Eligible candidates, best first (the rules in the module docstring)."""
    eligible = [c for c in candidates if disqualification(c, objective) is None]
    ordered: list[ServerlessCandidate] = []
    pool = list(eligible)
    while pool:
        cheapest = min(big(c.cost_per_1m) for c in pool)
        if cheapest == float("inf"):
            tier = list(pool)
        else:
            tier = [c for c in pool if big(c.cost_per_1m) <= cheapest * (1 + COST_TIE)]
        while tier:
            fastest = min(big(c.warm_p95_ms) for c in tier)
            band = [c for c in tier if big(c.warm_p95_ms) <= fastest * (1 + LATENCY_TIE)]
            if objective.target_rps:
                band.sort(key=lambda c: (c.max_concurrency, big(c.cold_start_p50_ms), c.index))
            else:
                band.sort(key=lambda c: (-(c.capacity_rps or 0.0), big(c.cold_start_p50_ms), c.index))
            ordered.extend(band)
            tier = [c for c in tier if c not in band]
        pool = [c for c in pool if c not in ordered]
    return ordered


def _versus(winner: ServerlessCandidate, other: ServerlessCandidate, objective: Objective) -> str:
    if big(other.cost_per_1m) > big(winner.cost_per_1m) * (1 + COST_TIE):
        return f"${other.cost_per_1m:.2f} per 1M vs ${winner.cost_per_1m:.2f}"
    if big(other.warm_p95_ms) > big(winner.warm_p95_ms) * (1 + LATENCY_TIE):
        return f"as cheap, but p95 {other.warm_p95_ms:.0f} ms warm vs {winner.warm_p95_ms:.0f}"
    if objective.target_rps and other.max_concurrency > winner.max_concurrency:
        return (f"MaxConcurrency {winner.max_concurrency} already serves {objective.target_rps:g} req/s "
                f"(this one takes {other.max_concurrency} of the region's concurrency quota)")
    if (other.capacity_rps or 0.0) < (winner.capacity_rps or 0.0):
        return (f"as cheap and as fast, but serves at most {other.capacity_rps or 0:.1f} req/s vs "
                f"{winner.capacity_rps or 0:.1f} (MaxConcurrency {other.max_concurrency} vs {winner.max_concurrency})")
    if big(other.cold_start_p50_ms) > big(winner.cold_start_p50_ms):
        return f"cold starts {_seconds(other.cold_start_p50_ms)} vs {_seconds(winner.cold_start_p50_ms)}"
    return "as good; listed later"


def headline(c: ServerlessCandidate, objective: Objective, compare: Any | None) -> str:
    """'serverless 4096 MB, MaxConcurrency 8: p95 61 ms warm, cold starts 0.8 s, $4.97 per 1M; real-time
    ml.c5.large is cheaper above 9.7 req/s sustained (25.5M requests a month)'."""
    p = objective.percentile if objective.percentile in WARM_KEYS else DEFAULT_SLO_PERCENTILE
    warm = c.warm_ms.get(p)
    parts = [f"serverless {c.memory_mb} MB, MaxConcurrency {c.max_concurrency}: "
             + (f"p{p:g} {warm:.0f} ms warm" if warm is not None else "warm latency unknown")]
    if c.cold_start_p50_ms is not None:
        parts.append(f"cold starts {_seconds(c.cold_start_p50_ms)}")
    if c.cost_per_1m is not None:
        parts.append(f"${c.cost_per_1m:.2f} per 1M")
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
              compare: Any | None = None) -> ServerlessRecommendation:
    ranked = rank(candidates, objective)
    lost = why_lost(candidates, ranked, lambda c: disqualification(c, objective),
                    lambda winner, other: _versus(winner, other, objective))
    if not ranked:
        return ServerlessRecommendation(None, nothing_meets("serverless configuration", candidates, lost), lost, [])
    return ServerlessRecommendation(ranked[0], headline(ranked[0], objective, compare), lost, ranked)
