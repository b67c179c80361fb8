"""A real-time configuration's row: its price, and the figures read back from its run folder
(written to sweep.json by `rows.Row.as_dict`; docs/sweep.md lists the keys)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sm_locust.sweep.costing import Price
from sm_locust.sweep.realtime.measure import Measurement
from sm_locust.sweep.rows import Row

WINDOW = ("knee_start", "knee_end")  # the knee step's epoch seconds: not in sweep.json


@dataclass(kw_only=True)
class RealtimeFigures(Measurement):
    """The figures at the configuration's knee and capacity steps (`realtime.measure`: each its own
    step's), the endpoint's CPU and memory at the knee, and what it costs, with the cost's 95 %
    intervals (from the capacity's); sweep.json calls the run's verdict line `verdict` and leaves out
    the knee step's window (it only serves to read CPU and memory)."""

    cpu_pct: float | None = None
    memory_pct: float | None = None
    cost_per_1m: float | None = None
    cost_per_1m_ci95: list[float] | None = None
    instances_needed: int | None = None
    instances_needed_ci95: list[int] | None = None
    cost_per_hour_at_target: float | None = None
    cost_per_hour_at_target_ci95: list[float] | None = None
    # under a model mix (`realtime.mix`; null otherwise)
    cache_hit_rate: float | None = None
    cache_hit_rate_ci95: list[float] | None = None
    models_loaded: float | None = None
    cold_p95_ms: float | None = None
    cost_per_model_month: float | None = None
    # with `load: {repeat: N}` (`realtime.measure.repeat_figures`; null otherwise)
    repeat: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, object]:
        return {("verdict" if k == "text" else k): v for k, v in asdict(self).items() if k not in WINDOW}


@dataclass(kw_only=True)
class RealtimeRow(Row):
    price: Price
    figures: RealtimeFigures | None = None

    def identity(self) -> dict[str, object]:
        return {"price_per_hour": self.price.usd_per_hour, "price_source": self.price.source,
                "instance_type": self.price.instance_type, "instance_count": self.price.instance_count}
