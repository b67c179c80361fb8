"""Which autoscaling configuration to recommend, and why the others lost (pure).

Eligible: the configuration ran; its seconds over the SLO (`slo_breach_s`, the run seconds whose
percentile was above `objective.slo_ms`) are at most `objective.max_breach_s` (0 when not given);
its failed and throttled requests are within `objective.max_error_rate`. Among the eligible, the
cheapest for the traffic wins (`cost_usd`: instance-hours x price; instance-hours when no price),
then the fewer seconds over the SLO, the fewer flaps, file order: the one ranking rule of every sweep
(`trust.rank_by_intervals`), with these figures exact: each counts what happened in the run (the
instance-hours its fleet was billed, its seconds over the SLO), not an estimate of a rate, so they
carry no sampling interval.

The sentence: "min_instances 2: 0 s over the p95 250 ms SLO, $0.21 for the traffic (0.90
instance-hours, peak 3 instances); scale-out 180 s after the metric crossed, serving 420 s after".
Why another lost: "min_instances 1: 310 s over the SLO while 2 instances started", or "$0.29
for the traffic, 38 % more than min_instances 2".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sm_locust.sweep.objective import Objective, nothing_meets, status_reason, why_lost
from sm_locust.sweep.trust import Criterion, rank_by_intervals
from sm_locust.util.formatting import percent


@dataclass
class ScalingCandidate:
    index: int
    label: str
    status: str = "ok"
    reason: str | None = None
    cost_usd: float | None = None
    instance_hours: float | None = None
    peak_instances: int | None = None
    slo_breach_s: float | None = None
    breach_cause: str | None = None  # "310 s over the SLO while 2 instances started"
    error_rate: float | None = None
    flaps: int = 0
    reaction_s: float | None = None
    ready_s: float | None = None
    awaited: int = 0  # an async variant's calls with no result by the end (in `error_rate`)
    scaled_out: bool = False  # a scale-out happened (timed or not: an async variant's reactions are not timed)
    first_result_ms: float | None = None  # an async variant's first request's time to result (its cold start)


@dataclass
class ScalingRecommendation:
    winner: ScalingCandidate | None
    reason: str
    lost: dict[int, str] = field(default_factory=dict)


def disqualification(c: ScalingCandidate, objective: Objective) -> str | None:
    """Why `c` cannot be recommended, or None."""
    if c.status != "ok":
        return status_reason(c.status, c.reason)
    budget = objective.max_breach_s or 0.0
    if objective.slo_ms is not None and c.slo_breach_s is None:
        return "no latency measured"
    if c.slo_breach_s is not None and c.slo_breach_s > budget + 1e-9:
        allowed = f" (max_breach_s {budget:g})" if budget else ""
        return (c.breach_cause or f"{c.slo_breach_s:.0f} s over the SLO") + allowed
    if c.error_rate is not None and c.error_rate > objective.max_error_rate:
        return (f"{percent(c.error_rate, trim=True)} of requests failed or were throttled"
                f"{', or had no result' if c.awaited else ''} "
                f"(budget {percent(objective.max_error_rate, trim=True)})")
    return None


CRITERIA: list[Criterion[ScalingCandidate]] = [
    Criterion("cost for the traffic", lambda c: c.cost_usd),
    Criterion("instance-hours", lambda c: c.instance_hours),
    Criterion("seconds over the SLO", lambda c: c.slo_breach_s),
    Criterion("flaps", lambda c: float(c.flaps)),
]


def _price(c: ScalingCandidate) -> str:
    if c.cost_usd is not None:
        return f"${c.cost_usd:.2f} for the traffic"
    return f"{c.instance_hours or 0:.2f} instance-hours" if c.instance_hours is not None else "cost unknown"


def _versus(winner: ScalingCandidate, other: ScalingCandidate) -> str:
    mine, theirs = (other.cost_usd, winner.cost_usd) if winner.cost_usd is not None else (
        other.instance_hours, winner.instance_hours)
    if mine is not None and theirs and mine > theirs:
        return f"{_price(other)}, {(mine / theirs - 1) * 100:.0f} % more than {winner.label}"
    if (other.slo_breach_s or 0) > (winner.slo_breach_s or 0):
        return f"as cheap as {winner.label}, but {other.slo_breach_s:.0f} s over the SLO"
    return f"as cheap as {winner.label}, with {other.flaps} flap{'s' if other.flaps != 1 else ''}"


def recommend(candidates: Sequence[ScalingCandidate], objective: Objective) -> ScalingRecommendation:
    eligible = [c for c in candidates if disqualification(c, objective) is None]
    ranked = rank_by_intervals(eligible, CRITERIA, lambda c: c.index)
    lost = why_lost(candidates, ranked, lambda c: disqualification(c, objective), _versus)
    if not ranked:
        return ScalingRecommendation(None, nothing_meets("configuration", candidates, lost), lost)
    w = ranked[0]
    slo = (f"{w.slo_breach_s:.0f} s over the {objective.percentile_label} {objective.slo_ms:g} ms SLO, "
           if objective.slo_ms is not None and w.slo_breach_s is not None else "")
    text = f"{w.label}: {slo}{_price(w)}"
    details = []
    if w.cost_usd is not None and w.instance_hours is not None:
        details.append(f"{w.instance_hours:.2f} instance-hours")
    if w.peak_instances:
        details.append(f"peak {w.peak_instances} instance{'s' if w.peak_instances != 1 else ''}")
    if details:
        text += f" ({', '.join(details)})"
    if w.reaction_s is not None:
        text += f"; scale-out {w.reaction_s:.0f} s after the metric crossed"
        if w.ready_s is not None:
            text += f", serving {w.ready_s:.0f} s after"
    elif w.peak_instances is not None and not w.scaled_out:
        text += "; it never scaled out"
    if w.first_result_ms is not None:
        text += f"; its first request's result came {w.first_result_ms / 1000:.1f} s after it (the cold start)"
    if w.flaps:
        text += f"; {w.flaps} flap{'s' if w.flaps != 1 else ''}"
    return ScalingRecommendation(w, text, lost)

