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

Ties: when the 95 % interval of the deciding figure (capacity for `throughput`, the percentile for
`latency`, the fleet's $ per hour at the target or $ per 1M for `cost`) of a configuration ranked
below the first overlaps the first's, the measurement cannot tell them apart: they tie, the one
that costs less per hour to run (price x instance count) is recommended, and the sentence says so
(`sweep/trust.py`). Without prices nothing tells the cheaper: the first on the point figure stays,
and the sentence says they tie.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sm_locust.sweep.objective import Objective, big, nothing_meets, status_reason, why_lost
from sm_locust.sweep.trust import cheapest, tied_with
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
    latency_ms: float | None = None  # the objective's percentile at the knee step
    error_rate: float | None = None
    cost_per_1m: float | None = None
    instances_needed: int | None = None
    cost_per_hour_at_target: float | None = None
    no_capacity_reason: str | None = None  # the run's own words when no load was acceptable
    capacity_ci95: list[float] | None = None  # 95 % intervals of the deciding figures
    latency_ci95: list[float] | None = None
    cost_per_1m_ci95: list[float] | None = None
    cost_per_hour_at_target_ci95: list[float] | None = None
    price_per_hour: float | None = None  # what running it costs (price x instance count): breaks a tie
    extra: dict[str, Any] = field(default_factory=dict)


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


def _load(users: float | None) -> str:
    if not isinstance(users, (int, float)):
        return ""
    return f" at {users:g} user{'s' if users != 1 else ''}"


def headline(c: Candidate, objective: Objective) -> str:
    """'max_concurrency 5: 116 req/s at 6 users, p95 44 ms, capacity 121 req/s (±3); 1 instance for 100
    req/s; $0.46 per 1M': the knee step's own rate, users and percentile, then the capacity (its own
    step's) when it differs; never one step's rate beside another's users."""
    rate = c.knee_rps if c.knee_rps is not None else c.capacity_rps
    head = f"{c.label}: {rate:.0f} req/s{_load(c.knee_users)}"
    if c.latency_ms is not None:
        head += f", {objective.percentile_label} {c.latency_ms:.0f} ms"
    if c.capacity_rps is not None and c.knee_rps is not None and abs(c.capacity_rps - c.knee_rps) >= 0.05:
        head += f", capacity {with_interval(c.capacity_rps, c.capacity_ci95, ' req/s')}"
    parts = [head]
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


@dataclass(frozen=True)
class Deciding:
    """The figure a ranking decides on: its name in a sentence, the candidate's attributes for its
    value and 95 % interval, and how it prints."""

    name: str
    value: str
    interval: str
    unit: str = ""
    dollars: bool = False

    def show(self, c: Candidate) -> str:
        """'121 req/s [115, 127]', '$0.46 [0.43, 0.50]'."""
        value, interval = getattr(c, self.value), getattr(c, self.interval)
        if value is None:
            return MISSING
        text = f"${value:.2f}" if self.dollars else f"{value:.0f}{self.unit}"
        if interval:
            low, high = interval
            text += f" [{low:.2f}, {high:.2f}]" if self.dollars else f" [{low:.0f}, {high:.0f}]"
        return text


def deciding_figure(mode: str, objective: Objective) -> Deciding:
    """The figure the ranking `mode` decides on (see the module docstring)."""
    if mode == "throughput":
        return Deciding("throughput", "capacity_rps", "capacity_ci95", " req/s")
    if mode == "latency":
        return Deciding(objective.percentile_label, "latency_ms", "latency_ci95", " ms")
    if objective.target_rps:
        return Deciding(f"$ per hour at {objective.target_rps:g} req/s", "cost_per_hour_at_target",
                        "cost_per_hour_at_target_ci95", dollars=True)
    return Deciding("$ per 1M", "cost_per_1m", "cost_per_1m_ci95", dollars=True)


def _tie(ranked: list[Candidate], mode: str, objective: Objective) -> tuple[list[Candidate], list[Candidate], str]:
    """(ranked with the tie broken, the configurations tied with the first, the sentence's tail)."""
    figure = deciding_figure(mode, objective)
    tied = tied_with(ranked, lambda c: getattr(c, figure.interval))
    if not tied:
        return ranked, [], ""
    group = [ranked[0], *tied]
    pick = cheapest(group, lambda c: c.price_per_hour)
    figures = " vs ".join(f"{c.label} {figure.show(c)}" for c in group)
    others = ", ".join(c.label for c in group if c is not (pick or ranked[0]))
    name = figure.name
    if pick is None:
        return ranked, tied, (f"; it TIES with {others} on {name} (95 % intervals overlap: {figures}), and no price "
                              "tells the cheaper: the higher point estimate is kept")
    reordered = [pick, *[c for c in ranked if c is not pick]]
    prices = " vs ".join(f"{money(c.price_per_hour, 3)}/h" for c in [pick, *[c for c in group if c is not pick]])
    return reordered, [c for c in group if c is not pick], (
        f"; it TIES with {others} on {name} (95 % intervals overlap: {figures}): the cheaper to run is "
        f"recommended ({prices})")


def recommend(candidates: Sequence[Candidate], objective: Objective) -> Recommendation:
    """The winner, its one-sentence reason, and why each other configuration lost."""
    mode = ranking_mode(candidates, objective)
    ranked, tied, tie_text = _tie(rank(candidates, objective), mode, objective)
    name = deciding_figure(mode, objective).name
    priced = ranked[0].price_per_hour is not None if ranked else False

    def versus(winner: Candidate, other: Candidate) -> str:
        if any(other is c for c in tied):
            return f"ties with {winner.label} on {name}; " + (f"{winner.label} costs less to run" if priced else
                                                               "no price tells them apart: the higher point was kept")
        return _versus(winner, other, mode, objective)

    lost = why_lost(candidates, ranked, lambda c: disqualification(c, objective), versus)
    if not ranked:
        return Recommendation(None, nothing_meets("configuration", candidates, lost), lost, [])
    winner = ranked[0]
    sentence = headline(winner, objective)
    if len(ranked) > 1 and not tie_text:
        sentence += f" — {_comparison(winner, ranked[1], mode, objective)}"
    elif len(ranked) == 1 and len(candidates) > 1:
        sentence += " — the only configuration that meets the objective"
    sentence += tie_text
    if mode != objective.optimize:
        sentence += " (no prices known: ranked by throughput)"
    return Recommendation(winner, sentence, lost, ranked, [c.index for c in tied])


