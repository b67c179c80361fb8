"""Whether a configuration's measurement can be trusted, and when two configurations tie (pure).

A measurement taken while the load generator was the bottleneck is not a measurement of the
endpoint: late sends, a saturated client CPU or the generator's own checks make the endpoint look
slower or smaller than it is, and an autoscaling run's seconds over the SLO then belong to the
client. `client_bound_reason` reads that from summary.json:

- the run's own `verdict` (`{"status": "inconclusive", "reason": ...}`, docs/summary.md), written
  when a step that decides the run's answer was client-bound;
- else (a run folder from before the verdict) its steps' `client_bound`: the plateau's capacity
  and knee steps (`plateau.capacity_step` / `knee_step`, or the steps at the plateau's users), or
  every step of a run without a plateau;
- with `every_step` (an autoscaling run, where every second of the traffic counts toward its
  seconds over the SLO), any client-bound step; and the seconds over the SLO during which the
  generator was behind (`autoscaling.breach_client_bound_s`) when they decide the verdict: without
  them the configuration would be within `max_breach_s`, with them it is not. A breach the endpoint
  made on its own (enough seconds over the SLO while the client kept up) stands.

The sweep measures such a configuration once more by itself (runner.py); still bound, it is
INCONCLUSIVE: never ranked, never the recommendation.

Ties: two configurations whose 95 % intervals overlap on the figure that decides the ranking
cannot be told apart by this measurement. `tied_with` finds the candidates that tie with the one
ranked first, and `cheapest` picks among them the one that costs less to run (price per hour),
which is what the sweep recommends, saying so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
Interval = tuple[float, float]


def _step_reason(index: int, step: Mapping[str, Any]) -> str:
    users = step.get("users")
    rate = step.get("target_rate")
    load = f"{rate:g} req/s offered" if isinstance(rate, (int, float)) else f"{users} users"
    return f"step {index + 1} ({load}): {step.get('client_bound_reason') or 'the load generator was the bottleneck'}"


def _deciding_steps(summary: Mapping[str, Any]) -> list[int]:
    """Indexes of the steps the run's answer rests on (see the module docstring)."""
    steps = summary.get("steps") or []
    plateau = summary.get("plateau")
    if not isinstance(plateau, Mapping):
        return list(range(len(steps)))
    named = [plateau.get(key) for key in ("capacity_step", "knee_step")]
    chosen = sorted({i for i in named if isinstance(i, int) and 0 <= i < len(steps)})
    if chosen:
        return chosen
    users = plateau.get("users")
    return [i for i, s in enumerate(steps) if isinstance(s, Mapping) and users is not None and s.get("users") == users]


def client_bound_reason(summary: Mapping[str, Any], *, every_step: bool = False,
                        max_breach_s: float | None = None) -> str | None:
    """Why this run measured the load generator rather than the endpoint, or None (module docstring)."""
    reasons: list[str] = []
    verdict = summary.get("verdict")
    if isinstance(verdict, Mapping) and verdict.get("status") == "inconclusive":
        reasons.append(str(verdict.get("reason") or "the run's verdict is inconclusive"))
    steps = [s for s in summary.get("steps") or [] if isinstance(s, Mapping)]
    if not isinstance(verdict, Mapping) or every_step:
        indexes = range(len(steps)) if every_step else _deciding_steps(summary)
        for i in indexes:
            if steps[i].get("client_bound"):
                reasons.append(_step_reason(i, steps[i]))
    scaling = summary.get("autoscaling")
    if every_step and isinstance(scaling, Mapping):
        behind = scaling.get("breach_client_bound_s")
        breach = scaling.get("slo_breach_s") or 0.0
        budget = max_breach_s or 0.0
        if isinstance(behind, (int, float)) and behind > 0 and breach - behind <= budget + 1e-9 < breach:
            reasons.append(f"{behind:.0f} s of the {breach:.0f} s over the SLO came while the load generator was "
                           f"behind (late sends, a saturated or starved client CPU), and without them the run is "
                           f"within max_breach_s {budget:g}")
    unique = list(dict.fromkeys(reasons))
    return "; ".join(unique) if unique else None


# ------------------------------------------------------------------------------------------- ties

def overlap(a: Interval | None, b: Interval | None) -> bool:
    """Two 95 % intervals share a value (both known)."""
    return a is not None and b is not None and a[0] <= b[1] and b[0] <= a[1]


def tied_with(ranked: Sequence[T], interval: Callable[[T], Interval | None]) -> list[T]:
    """The candidates after the first whose interval on the deciding figure overlaps the first's
    (in rank order); empty when the first has no interval or nothing overlaps it."""
    if not ranked or interval(ranked[0]) is None:
        return []
    best = interval(ranked[0])
    return [c for c in ranked[1:] if overlap(best, interval(c))]


def cheapest(candidates: Sequence[T], price: Callable[[T], float | None]) -> T | None:
    """The candidate with the lowest price per hour (the first, in rank order, among equals); None
    when no candidate has a price (nothing tells which is cheaper)."""
    priced = [c for c in candidates if price(c) is not None]
    if not priced:
        return None
    return min(priced, key=lambda c: price(c))  # type: ignore[arg-type, return-value]
