"""A real-time configuration's row: its price, and the figures read back from its run folder
(written to sweep.json by `rows.Row.as_dict`; docs/sweep.md lists the keys)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from sm_locust.sweep.costing import Price
from sm_locust.sweep.rows import Row


@dataclass(kw_only=True)
class RealtimeFigures:
    """At the configuration's knee (`realtime.measure`), the endpoint's CPU and memory there, and cost."""

    capacity_rps: float | None = None
    knee_rps: float | None = None
    knee_users: float | None = None
    p50_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    latency_ms: float | None = None  # at the objective's percentile
    error_rate: float | None = None
    basis: str = ""
    verdict: str = ""  # the run's own verdict line, or what the figure is
    no_capacity_reason: str | None = None
    curve: list[dict[str, Any]] = field(default_factory=list)
    requests: int | None = None
    failures: int | None = None
    cpu_pct: float | None = None
    memory_pct: float | None = None
    cost_per_1m: float | None = None
    instances_needed: int | None = None
    cost_per_hour_at_target: float | None = None
    # under a model mix (`realtime.mix`; null otherwise)
    cache_hit_rate: float | None = None
    models_loaded: float | None = None
    cold_p95_ms: float | None = None
    cost_per_model_month: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(kw_only=True)
class RealtimeRow(Row):
    price: Price
    figures: RealtimeFigures | None = None

    def identity(self) -> dict[str, Any]:
        return {"price_per_hour": self.price.usd_per_hour, "price_source": self.price.source,
                "instance_type": self.price.instance_type, "instance_count": self.price.instance_count}
