"""An async configuration's run folder -> the figures an async sweep compares (pure: fed summary.json).

The **capacity** is the async search's (summary.json `async_search`, plateau/asyncsearch.py): the highest
rate whose backlog was shown bounded and whose time to result was shown within the SLO, before the first
step whose backlog grew or whose time to result broke the SLO. Its interval is the search's **bracket**:
at least `capacity_rps`, below the rate that stopped the search (`capacity_ci95 = [capacity, stop]`, the
upper end open: that rate is not within the capacity); a search that reached `max_rps` without stopping
shows a lower bound only (`[capacity, null]`). The **time to result** is the capacity step's own
percentile with its 95 % interval (plateau/asyncslo.py). An `INCONCLUSIVE` search (a step above the
capacity whose SLO verdict stayed undecided: the capacity may lie there) is said, never recommended.
**Cost** is priced from instance-hours: instance-hours per 1M inferences = instances / (capacity x 3600)
x 1e6, times the price (`report/cost.py`), with the same arithmetic at the bracket's ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sm_locust.record.model import JsonObject, Summary
from sm_locust.report.cost import cost_per_million

GROWS, BREACH, KEEPS = "grows", "breach", "keeps"


@dataclass(kw_only=True)
class AsyncMeasurement:
    """What one async search measured (module doc); None where it could not be known."""

    capacity_rps: float | None = None
    capacity_ci95: list[float | None] | None = None  # [capacity, the rate that stopped the search (open)]
    stopped_by: str | None = None  # 'backlog grows', 'time to result above the SLO', or None (not stopped)
    stop_reason: str | None = None
    time_to_result_ms: float | None = None  # the objective's percentile at the capacity step
    time_to_result_ci95: list[float] | None = None
    backlog_slope_per_s: float | None = None  # at the capacity step
    backlog_slope_ci95: list[float] | None = None
    inconclusive: bool = False  # the search's own verdict (an undecided step above the capacity)
    inconclusive_reason: str | None = None
    no_capacity_reason: str | None = None
    accepted: int | None = None  # the whole run's (summary.json `async`)
    results: int | None = None
    failures: int | None = None
    awaited_at_stop: int | None = None
    backlog_max: int | None = None
    error_rate: float | None = None  # failures / accepted over the run
    steps: list[dict[str, object]] = field(default_factory=list)  # rate, backlog verdict, time to result, SLO verdict


def _pair(value: object) -> list[float] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return [float(value[0]), float(value[1])]
    return None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def measure(summary: Summary | JsonObject) -> AsyncMeasurement:
    """The figures of one `--shape async` run with a time-to-result SLO (summary.json's content)."""
    record = Summary.of(summary)
    m = AsyncMeasurement()
    waited = record.async_
    if waited is not None:
        m.accepted, m.results, m.failures = waited.accepted, waited.results, waited.failures
        m.awaited_at_stop, m.backlog_max = waited.awaited_at_stop, waited.backlog_max
        m.error_rate = waited.failures / waited.accepted if waited.accepted else None
    search = record.async_search
    if search is None:
        m.no_capacity_reason = "the run has no async search (summary.json async_search): was it --shape async?"
        return m
    m.steps = [{"rate_rps": s.rate_rps, "backlog": s.backlog, "backlog_last": s.backlog_last,
                "backlog_slope_per_s": s.backlog_slope_per_s, "time_to_result_ms": s.time_to_result_ms,
                "time_to_result_ci95": _pair(s.time_to_result_ci95), "slo": s.slo} for s in search.steps]
    m.stop_reason = search.stop_reason
    if search.verdict == "INCONCLUSIVE":
        m.inconclusive = True
        m.inconclusive_reason = search.inconclusive_reason or "the async search could not decide"
    grows, breach = search.grows_at_rps, search.slo_breach_at_rps
    stop = grows if grows is not None else breach
    m.stopped_by = "backlog grows" if grows is not None else "time to result above the SLO" if breach is not None \
        else None
    capacity = search.capacity_rps
    if capacity is None:
        m.no_capacity_reason = (f"no rate kept the time-to-result SLO with a bounded backlog ({m.stop_reason})"
                                if m.stop_reason else "no rate kept the time-to-result SLO with a bounded backlog")
        return m
    m.capacity_rps = float(capacity)
    m.capacity_ci95 = [m.capacity_rps, None if stop is None else float(stop)]
    at = next((s for s in reversed(search.steps) if s.rate_rps == capacity), None)
    if at is not None:
        m.time_to_result_ms = at.time_to_result_ms
        m.time_to_result_ci95 = _pair(at.time_to_result_ci95)
        m.backlog_slope_per_s = at.backlog_slope_per_s
        m.backlog_slope_ci95 = _pair(at.backlog_slope_ci95)
    return m


def instance_hours_per_1m(instances: int, rps: float | None) -> float | None:
    """Instance-hours one million inferences take at `rps` on `instances` instances."""
    return None if not rps or rps <= 0 else instances / (rps * 3600.0) * 1e6


@dataclass(frozen=True)
class AsyncCost:
    instance_hours_per_1m: float | None = None
    instance_hours_per_1m_ci95: list[float | None] | None = None  # from the bracket: [at its top (open), at capacity]
    cost_per_1m: float | None = None
    cost_per_1m_ci95: list[float | None] | None = None


def priced(capacity_rps: float | None, capacity_ci95: list[float | None] | None, instances: int,
           price_per_hour: float | None) -> AsyncCost:
    """Instance-hours and $ per 1M at the capacity, and at the bracket's ends (the bracket's top gives the low
    end; a bracket without a top, a lower bound, gives 0: the measurement says no more)."""
    hours = instance_hours_per_1m(instances, capacity_rps)
    if hours is None:
        return AsyncCost()
    low_rps, high_rps = (capacity_ci95 or [capacity_rps, None])
    low = 0.0 if high_rps is None else instance_hours_per_1m(instances, high_rps)
    hours_ci = [low, instance_hours_per_1m(instances, low_rps)]
    if price_per_hour is None:
        return AsyncCost(hours, hours_ci)
    return AsyncCost(hours, hours_ci, cost_per_million(price_per_hour, instances, capacity_rps or 0.0),
                     [None if v is None else v * price_per_hour for v in hours_ci])
