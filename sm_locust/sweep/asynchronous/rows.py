"""An async configuration's row: its instances, workers and price, and the figures read back from its
run folder (written to sweep.json by `rows.Row.as_dict`; docs/async.md lists the keys)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from sm_locust.sweep.asynchronous.measure import AsyncMeasurement
from sm_locust.sweep.costing import Price
from sm_locust.sweep.rows import Row


@dataclass(kw_only=True)
class AsyncFigures(AsyncMeasurement):
    """The search's figures (`asynchronous.measure`) and what a million inferences cost at the capacity."""

    instance_hours_per_1m: float | None = None
    instance_hours_per_1m_ci95: list[float | None] | None = None
    cost_per_1m: float | None = None
    cost_per_1m_ci95: list[float | None] | None = None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(kw_only=True)
class AsyncRow(Row):
    instance_count: int
    max_concurrent_invocations_per_instance: int
    price: Price
    figures: AsyncFigures | None = None

    @property
    def fleet_per_hour(self) -> float | None:
        """What running the configuration costs per hour (price x instances), None without a price."""
        return None if self.price.usd_per_hour is None else self.price.usd_per_hour * self.instance_count

    def identity(self) -> dict[str, object]:
        return {"instance_count": self.instance_count,
                "max_concurrent_invocations_per_instance": self.max_concurrent_invocations_per_instance,
                "price_per_hour": self.price.usd_per_hour, "price_source": self.price.source,
                "instance_type": self.price.instance_type, "fleet_per_hour": self.fleet_per_hour}
