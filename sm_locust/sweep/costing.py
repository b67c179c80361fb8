"""What each configuration costs: its price, $ per 1M inferences, the fleet for the target, and
the plan's estimate before anything is deployed.

The arithmetic and the price table are the report's (`sm_locust/report/cost.py`, its bundled
`prices.json`, a `prices:` file overriding it entry by entry); this module only decides which
price applies to a configuration and adds up the plan:

    price per hour     = price_per_hour if the configuration (or the file) gives one, else the
                         table's price for instance_type; an instance type missing from the table
                         is a usage error naming it, unless price_per_hour is given
    $ per 1M           = price x instance_count / (capacity x 3600) x 1e6     (cost.cost_per_million)
    instances needed   = ceil(target / (capacity per instance x safety factor))
    $ per hour at target = instances needed x price
    their 95 % intervals = the same arithmetic at the capacity's interval bounds (`cost_intervals`:
                         a capacity at its high bound costs the least; the fleet is whole instances)

Plan estimate per configuration: billed time = deploy + test + delete, plus, with
max_parallel_endpoints N > 1, up to N - 1 tests of waiting before its own (an endpoint created
early is billed while it waits); instance-hours = instance_count x billed time; $ = that x price.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sm_locust.errors import UsageError
from sm_locust.report.cost import PriceTable, cost_per_million, instances_interval, instances_needed
from sm_locust.sweep.objective import Objective


@dataclass(frozen=True)
class Price:
    usd_per_hour: float | None
    source: str | None
    instance_type: str | None
    instance_count: int = 1


def price_of(settings: Mapping[str, Any], table: PriceTable, *, where: str = "") -> Price:
    """The price that applies to one configuration's settings."""
    instance_type = settings.get("instance_type")
    count = int(settings.get("instance_count") or 1)
    if settings.get("price_per_hour") is not None:
        return Price(float(settings["price_per_hour"]), "price_per_hour", instance_type, count)
    if instance_type:
        priced = table.lookup(str(instance_type))
        if priced is None:
            prefix = f"{where}: " if where else ""
            raise UsageError(f"{prefix}instance type {instance_type} is not in the price table "
                             f"({', '.join(table.sources)}); give price_per_hour, or prices: FILE with its price")
        return Price(priced.usd_per_hour, f"{priced.source} ({table.region} on-demand, {table.as_of})", instance_type,
                     count)
    return Price(None, None, None, count)


def figures(capacity_rps: float | None, price: Price, objective: Objective) -> dict[str, Any]:
    """$ per 1M, instances needed for the target and the fleet's $ per hour (None when unknown)."""
    out: dict[str, Any] = {"cost_per_1m": None, "instances_needed": None, "cost_per_hour_at_target": None}
    if not capacity_rps:
        return out
    if price.usd_per_hour is not None:
        out["cost_per_1m"] = cost_per_million(price.usd_per_hour, price.instance_count, capacity_rps)
    if objective.target_rps:
        per_instance = capacity_rps / price.instance_count
        out["instances_needed"] = instances_needed(objective.target_rps, per_instance, objective.safety_factor)
        if price.usd_per_hour is not None and out["instances_needed"] is not None:
            out["cost_per_hour_at_target"] = out["instances_needed"] * price.usd_per_hour
    return out


def cost_intervals(capacity_ci95: object, price: Price, objective: Objective) -> dict[str, Any]:
    """`cost_per_1m_ci95`, `instances_needed_ci95` and `cost_per_hour_at_target_ci95` from the
    capacity's 95 % interval (each falls as capacity grows, so its low bound comes from the capacity's
    high one); None when either is unknown or the low bound has no throughput to price."""
    out: dict[str, object] = {"cost_per_1m_ci95": None, "cost_per_hour_at_target_ci95": None,
                           "instances_needed_ci95": None}
    if objective.target_rps:
        out["instances_needed_ci95"] = instances_interval(objective.target_rps, capacity_ci95, objective.safety_factor,
                                                          price.instance_count)
    if not isinstance(capacity_ci95, (list, tuple)) or len(capacity_ci95) != 2:
        return out
    low, high = capacity_ci95
    if not isinstance(low, (int, float)) or not isinstance(high, (int, float)) or not low > 0:
        return out
    cheap, dear = figures(float(high), price, objective), figures(float(low), price, objective)
    for key in ("cost_per_1m", "cost_per_hour_at_target"):
        if cheap[key] is not None and dear[key] is not None:
            out[f"{key}_ci95"] = [cheap[key], dear[key]]
    return out


@dataclass(frozen=True)
class Estimate:
    deploy_s: float
    test_s: float
    delete_s: float
    wait_s: float  # alive, waiting for earlier configurations' tests (overlap)
    instance_hours: float
    usd: float | None

    @property
    def billed_s(self) -> float:
        return self.deploy_s + self.wait_s + self.test_s + self.delete_s


def estimate(price: Price, *, deploy_s: float, test_s: float, delete_s: float, wait_s: float = 0.0) -> Estimate:
    hours = price.instance_count * (deploy_s + wait_s + test_s + delete_s) / 3600.0
    usd = hours * price.usd_per_hour if price.usd_per_hour is not None else None
    return Estimate(deploy_s, test_s, delete_s, wait_s, hours, usd)
