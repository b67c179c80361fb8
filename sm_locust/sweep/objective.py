"""What "best" means for every sweep kind: the `objective:` section, and the ranking helpers (pure).

`Objective` holds the target rate, SLO and percentile, error budget, safety factor and what to
optimize. Each kind ranks its own figures with the same vocabulary: an ineligible configuration has
a *disqualification*, the winner is the first eligible one, every other gets one reason it lost
(`why_lost`, `nothing_meets`); `pareto_front` marks those no other beats on both cost and latency.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from sm_locust.measure.steady import DEFAULT_SLO_PERCENTILE
from sm_locust.record.model import percentile_key
from sm_locust.report.cost import DEFAULT_SAFETY_FACTOR  # one default: the report's, the sweeps', the notebook's

OPTIMIZE = ("cost", "throughput", "latency")
# the percentiles summary.json records per step (docs/summary.md) -> their keys
PERCENTILE_KEYS = {p: percentile_key(p) for p in (50.0, 90.0, 95.0, 99.0, 99.9)}
DEFAULT_MAX_ERROR_RATE = 0.01  # the report's rule for a sustainable step (docs/report.md, Cost)
class Ranked(Protocol):
    """What the shared helpers read of a kind's candidate (realtime.rank.Candidate, ServerlessCandidate)."""

    index: int
    label: str


class Judged(Ranked, Protocol):
    """A candidate with its run's status (ok, failed, inconclusive, ...)."""

    status: str


class Recommended(Protocol):
    """What sweep.json's writer reads of a kind's recommendation (realtime.rank.Recommendation, ...)."""

    @property
    def winner(self) -> Ranked | None: ...

    @property
    def reason(self) -> str: ...

    @property
    def lost(self) -> Mapping[int, str]: ...


C = TypeVar("C", bound=Ranked)
J = TypeVar("J", bound=Judged)
P = TypeVar("P")  # what names a point of a Pareto front


@dataclass(frozen=True)
class Objective:
    """The sweep file's `objective:` section."""

    target_rps: float | None = None
    slo_ms: float | None = None
    percentile: float = DEFAULT_SLO_PERCENTILE
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE
    safety_factor: float = DEFAULT_SAFETY_FACTOR  # instances for the target at this share of the measured capacity
    optimize: str = "cost"
    max_breach_s: float | None = None  # autoscaling sweeps: seconds over the SLO a configuration may have

    @property
    def percentile_label(self) -> str:
        return f"p{self.percentile:g}"

    def as_dict(self) -> dict[str, object]:
        return {"target_rps": self.target_rps, "slo_ms": self.slo_ms, "percentile": self.percentile,
                "max_error_rate": self.max_error_rate, "safety_factor": self.safety_factor, "optimize": self.optimize,
                **({"max_breach_s": self.max_breach_s} if self.max_breach_s is not None else {})}


def status_reason(status: str, reason: str | None) -> str:
    """Why a configuration that did not measure cannot be recommended: 'failed: ...', and an
    inconclusive one loudly ('INCONCLUSIVE: ...': its figures are the load generator's)."""
    word = status.upper() if status == "inconclusive" else status
    return f"{word}: {reason}" if reason else word


def big(value: float | None) -> float:
    """A figure for sorting lowest-first, unknown (None) last."""
    return math.inf if value is None else value


def why_lost(candidates: Sequence[C], ranked: Sequence[C], disqualify: Callable[[C], str | None],
             versus: Callable[[C, C], str]) -> dict[int, str]:
    """index -> why that configuration lost: its disqualification, or for an eligible one below the
    winner (`ranked[0]`) the figure `versus(winner, other)` names (every kind's `recommend` calls it)."""
    lost: dict[int, str] = {}
    for c in candidates:
        why = disqualify(c)
        if why is not None:
            lost[c.index] = why
    for other in ranked[1:]:
        lost[other.index] = versus(ranked[0], other)
    return lost


def nothing_meets(noun: str, candidates: Sequence[Ranked], lost: dict[int, str]) -> str:
    """The recommendation's sentence when no configuration is eligible: each one's reason."""
    reasons = "; ".join(f"{c.label}: {lost[c.index]}" for c in candidates) or "no configurations"
    return f"no {noun} meets the objective ({reasons})"


def pareto_front(points: Sequence[tuple[P, float, float]]) -> list[P]:
    """Ids of the points (id, cost, latency) no other point beats on both (lower is better),
    sorted by cost. A point equal to another on both counts stays on the front."""
    front = []
    for pid, cost, latency in points:
        dominated = any(c <= cost and lat <= latency and (c < cost or lat < latency) for _, c, lat in points)
        if not dominated:
            front.append((cost, latency, pid))
    return [pid for _, _, pid in sorted(front, key=lambda t: (t[0], t[1]))]
