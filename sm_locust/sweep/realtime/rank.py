"""Which real-time configuration wins: eligibility, ranking, the recommendation (pure).

A configuration is *eligible* when it ran, found a sustainable throughput, and at that point meets
the SLO (the objective's percentile at or under `slo_ms`) and the error budget. Eligible
configurations are ranked by the objective's `optimize`:

- `cost` (default): the $ per hour of the fleet that serves `target_rps` (instances needed x price),
  then $ per 1M inferences (more headroom for the same fleet), then latency. Without a target, $
  per 1M first. Without prices it falls back to throughput.
- `throughput`: capacity (req/s), then latency.
- `latency`: the percentile at the knee, then cost.

`recommend` returns the winner, a one-sentence reason with the figure that decided against the
runner-up, and for every other configuration why it lost.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sm_locust.sweep.objective import Objective, big, nothing_meets, why_lost
from sm_locust.util.formatting import MISSING, percent


@dataclass
class Candidate:
    """One configuration's figures, as ranking needs them (plain data, filled by the runner)."""

    index: int
    label: str
    status: str = "ok"  # ok | failed | skipped | interrupted
    reason: str | None = None  # why it failed or was skipped
    capacity_rps: float | None = None
    knee_users: float | None = None
    latency_ms: float | None = None  # the objective's percentile at the knee
    error_rate: float | None = None
    cost_per_1m: float | None = None
    instances_needed: int | None = None
    cost_per_hour_at_target: float | None = None
    no_capacity_reason: str | None = None  # the run's own words when no load was acceptable
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Recommendation:
    winner: Candidate | None
    reason: str
    lost: dict[int, str]  # index -> why it lost
    ranked: list[Candidate]  # eligible, best first


def disqualification(c: Candidate, objective: Objective) -> str | None:
    """Why `c` cannot be recommended, or None when it meets the objective."""
    if c.status != "ok":
        return f"{c.status}: {c.reason}" if c.reason else c.status
    if not c.capacity_rps:
        return c.no_capacity_reason or "no sustainable throughput found"
    p = objective.percentile_label
    if objective.slo_ms is not None:
        if c.latency_ms is None:
            return f"no {p} measured at the knee"
        if c.latency_ms > objective.slo_ms:
            return f"{p} {c.latency_ms:.0f} ms at the knee > SLO {objective.slo_ms:g} ms"
    if c.error_rate is not None and c.error_rate > objective.max_error_rate:
        return (f"error rate {percent(c.error_rate, trim=True)} at the knee > "
                f"{percent(objective.max_error_rate, trim=True)}")
    return None


def ranking_mode(candidates: Iterable[Candidate], objective: Objective) -> str:
    """The ranking actually used: `cost` needs prices; without them it is `throughput`."""
    if objective.optimize == "cost" and not any(c.cost_per_1m is not None for c in candidates):
        return "throughput"
    return objective.optimize


def sort_key(c: Candidate, mode: str, objective: Objective) -> tuple:
    latency = big(c.latency_ms)
    capacity = -(c.capacity_rps or 0.0)
    if mode == "throughput":
        return (capacity, latency, c.index)
    if mode == "latency":
        return (latency, big(c.cost_per_1m), capacity, c.index)
    fleet = big(c.cost_per_hour_at_target) if objective.target_rps else 0.0
    return (fleet, big(c.cost_per_1m), latency, c.index)


def rank(candidates: Sequence[Candidate], objective: Objective) -> list[Candidate]:
    """Eligible candidates, best first."""
    mode = ranking_mode(candidates, objective)
    eligible = [c for c in candidates if disqualification(c, objective) is None]
    return sorted(eligible, key=lambda c: sort_key(c, mode, objective))


def _less(a: float | None, b: float | None) -> str:
    """'52 % cheaper' style: how much lower a is than b, in % of b."""
    if a is None or b is None:
        return MISSING
    return f"{(1 - a / b) * 100:.0f} %" if b else "0 %"


def headline(c: Candidate, objective: Objective) -> str:
    """'max_concurrency 5: 121 req/s at p95 44 ms; 1 instance for 100 req/s; $0.46 per 1M'."""
    parts = [f"{c.label}: {c.capacity_rps:.0f} req/s"
             + (f" at {objective.percentile_label} {c.latency_ms:.0f} ms" if c.latency_ms is not None else "")]
    if objective.target_rps and c.instances_needed:
        plural = "instance" if c.instances_needed == 1 else "instances"
        parts.append(f"{c.instances_needed} {plural} for {objective.target_rps:g} req/s")
    if c.cost_per_1m is not None:
        parts.append(f"${c.cost_per_1m:.2f} per 1M")
    return "; ".join(parts)


def _versus(winner: Candidate, other: Candidate, mode: str, objective: Objective) -> str:
    """Why `other` ranks below `winner`, in the figure that decided it."""
    p = objective.percentile_label
    if mode == "throughput":
        if (other.capacity_rps or 0) < (winner.capacity_rps or 0):
            return f"{other.capacity_rps:.0f} req/s vs {winner.capacity_rps:.0f}"
        return f"same throughput, {p} {big(other.latency_ms):.0f} ms vs {big(winner.latency_ms):.0f}"
    if mode == "latency":
        if big(other.latency_ms) > big(winner.latency_ms):
            return f"{p} {other.latency_ms:.0f} ms vs {winner.latency_ms:.0f}"
        return f"same latency, ${big(other.cost_per_1m):.2f} per 1M vs ${big(winner.cost_per_1m):.2f}"
    if objective.target_rps and big(other.cost_per_hour_at_target) > big(winner.cost_per_hour_at_target):
        n = other.instances_needed
        return (f"{n} instance{'s' if n != 1 else ''} for {objective.target_rps:g} req/s cost "
                f"${other.cost_per_hour_at_target:.2f}/h vs ${winner.cost_per_hour_at_target:.2f}/h")
    if big(other.cost_per_1m) > big(winner.cost_per_1m):
        return f"${other.cost_per_1m:.2f} per 1M vs ${winner.cost_per_1m:.2f}"
    return f"as cheap, {p} {big(other.latency_ms):.0f} ms vs {big(winner.latency_ms):.0f}"


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


def recommend(candidates: Sequence[Candidate], objective: Objective) -> Recommendation:
    """The winner, its one-sentence reason, and why each other configuration lost."""
    mode = ranking_mode(candidates, objective)
    ranked = rank(candidates, objective)
    lost = why_lost(candidates, ranked, lambda c: disqualification(c, objective),
                    lambda winner, other: _versus(winner, other, mode, objective))
    if not ranked:
        return Recommendation(None, nothing_meets("configuration", candidates, lost), lost, [])
    winner = ranked[0]
    sentence = headline(winner, objective)
    if len(ranked) > 1:
        sentence += f" — {_comparison(winner, ranked[1], mode, objective)}"
    elif len(candidates) > 1:
        sentence += " — the only configuration that meets the objective"
    if mode != objective.optimize:
        sentence += " (no prices known: ranked by throughput)"
    return Recommendation(winner, sentence, lost, ranked)


