"""Pure cost arithmetic: what the measured throughput means in dollars and instances.

The figures users compare instance types by (see the ResNet50 benchmark: "$0.30 per 1 million
inferences", "1.1 million transactions per hour") and the ones they configure autoscaling with:

    $ per 1M inferences   = price per hour x instances / (rps x 3600) x 1,000,000
    $ per 1M output tokens = price per hour x instances / (output tokens/s x 3600) x 1,000,000   (LLMs)
    transactions per hour = rps x 3600
    per-instance rps      = rps / instances
    instances needed      = ceil(target rps / (per-instance rps x safety factor))
    autoscaling target    = per-instance rps x safety factor x 60
                            (SageMakerVariantInvocationsPerInstance is per minute)
    serverless $/request  = memory GB x billed seconds x $ per GB-second
                            (billed seconds = duration rounded up to the ms; memory GB = MB / 1024)

Prices come from the bundled `prices.json` (approximate us-east-1 on-demand, dated; always check
https://aws.amazon.com/sagemaker/pricing/), a user JSON file of the same shape overriding it
entry by entry, or `--price-per-hour` overriding both.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from sm_locust.errors import UsageError
from sm_locust.util.numbers import check_number
from sm_locust.util.yamlsafe import load_json, read_text_file

if TYPE_CHECKING:  # the record is only named here: `run`'s parent imports this module (scaling/watch.py)
    from sm_locust.record.model import SustainablePoint

DEFAULT_SAFETY_FACTOR = 0.5  # AWS's suggested starting point for InvocationsPerInstance targets


@dataclass(frozen=True)
class InstancePrice:
    instance_type: str
    usd_per_hour: float
    vcpus: int | None = None
    gpus: int | None = None
    memory_gib: float | None = None
    source: str = "bundled"


@dataclass
class PriceTable:
    instances: dict[str, InstancePrice] = field(default_factory=dict)
    serverless_usd_per_gb_second: float | None = None
    as_of: str = ""
    region: str = ""
    sources: list[str] = field(default_factory=list)

    def lookup(self, instance_type: str | None) -> InstancePrice | None:
        if not instance_type:
            return None
        key = instance_type if instance_type.startswith("ml.") else f"ml.{instance_type}"
        return self.instances.get(key)


def _merge(table: PriceTable, data: dict[str, Any], source: str) -> None:
    for name, entry in (data.get("instances") or {}).items():
        if isinstance(entry, (int, float)):
            entry = {"usd_per_hour": entry}
        if not isinstance(entry, dict) or not isinstance(entry.get("usd_per_hour"), (int, float)):
            raise UsageError(f"{source}: instance {name!r} needs a numeric usd_per_hour")
        price = check_number(entry["usd_per_hour"], f"{source}: instance {name!r} usd_per_hour", minimum=0)
        old = table.instances.get(name)
        table.instances[name] = InstancePrice(
            name, float(price),
            entry.get("vcpus", old.vcpus if old else None),
            entry.get("gpus", old.gpus if old else None),
            entry.get("memory_gib", old.memory_gib if old else None),
            source,
        )
    serverless = data.get("serverless") or {}
    if isinstance(serverless.get("usd_per_gb_second"), (int, float)):
        table.serverless_usd_per_gb_second = float(check_number(
            serverless["usd_per_gb_second"], f"{source}: serverless usd_per_gb_second", minimum=0))
    table.as_of = str(data.get("as_of", table.as_of))
    table.region = str(data.get("region", table.region))
    table.sources.append(source)


MAX_PRICE_FILE_BYTES = 16 << 20  # a price table: every instance type of every region fits in a few MB


def price_documents(bundled: str, user_file: str | Path | None = None,
                    what: str = "price file") -> list[tuple[str, dict[str, object]]]:
    """(source, JSON object) of the bundled price file `bundled` (in sm_locust/report/), then of
    `user_file` when given, which overrides it entry by entry: the one reader of every price file
    (instances, serverless), so a missing or broken one is worded the same."""
    documents = [(f"bundled {bundled}",
                  json.loads(resources.files("sm_locust.report").joinpath(bundled).read_text(encoding="utf-8")))]
    if user_file:
        path = Path(user_file)
        if not os.path.lexists(path):
            raise UsageError(f"{what} {path} does not exist")
        text = read_text_file(path, f"{what} {path}", limit=MAX_PRICE_FILE_BYTES)  # a regular UTF-8 file, bounded
        try:
            data = load_json(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{what} {path} is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise UsageError(f"{what} {path} must hold a JSON object like the bundled {bundled}")
        documents.append((str(path), data))
    return documents


def load_prices(user_file: str | Path | None = None) -> PriceTable:
    """The bundled table, overridden entry by entry by `user_file` when given."""
    table = PriceTable()
    for source, data in price_documents("prices.json", user_file):
        _merge(table, data, source)
    return table


def cost_per_million(price_per_hour: float, instances: int, rps: float) -> float | None:
    if not rps or rps <= 0 or price_per_hour is None:
        return None
    return price_per_hour * instances / (rps * 3600.0) * 1e6


def cost_per_million_tokens(price_per_hour: float, instances: int, tokens_per_s: float) -> float | None:
    """$ per 1M output tokens = price per hour x instances / (output tokens/s x 3600) x 1,000,000."""
    return cost_per_million(price_per_hour, instances, tokens_per_s)


def transactions_per_hour(rps: float) -> float:
    return rps * 3600.0


def instances_needed(target_rps: float, rps_per_instance: float, safety_factor: float = 1.0) -> int | None:
    if not rps_per_instance or rps_per_instance <= 0 or safety_factor <= 0:
        return None
    return max(1, math.ceil(target_rps / (rps_per_instance * safety_factor) - 1e-9))


def autoscaling_target(rps_per_instance: float, safety_factor: float = DEFAULT_SAFETY_FACTOR) -> float:
    """Target value for SageMakerVariantInvocationsPerInstance (invocations per instance per minute)."""
    return rps_per_instance * safety_factor * 60.0


def serverless_cost_per_inference(memory_mb: int, duration_ms: float, usd_per_gb_second: float) -> float:
    billed_s = math.ceil(duration_ms) / 1000.0
    return memory_mb / 1024.0 * billed_s * usd_per_gb_second


def cost_interval(price_per_hour: float, instance_count: int, rps_ci95: object) -> list[float] | None:
    """The 95 % interval of $ per 1M from the interval of the rate it divides by: [cost at the high
    rate, cost at the low rate] (the cost falls as the rate rises); None without a rate interval or
    when its low end is 0 (no upper bound on the cost)."""
    if not isinstance(rps_ci95, (list, tuple)) or len(rps_ci95) != 2:
        return None
    low, high = rps_ci95
    if not isinstance(low, (int, float)) or not isinstance(high, (int, float)) or not 0 < low <= high:
        return None
    cheapest = cost_per_million(price_per_hour, instance_count, high)
    dearest = cost_per_million(price_per_hour, instance_count, low)
    return None if cheapest is None or dearest is None else [round(cheapest, 6), round(dearest, 6)]


def _rate_bounds(rps_ci95: object, instance_count: int = 1) -> tuple[float, float] | None:
    """A rate interval per instance, (low, high) with 0 < low <= high; None otherwise."""
    if not isinstance(rps_ci95, (list, tuple)) or len(rps_ci95) != 2:
        return None
    low, high = rps_ci95
    if not isinstance(low, (int, float)) or not isinstance(high, (int, float)) or not 0 < low <= high:
        return None
    return low / instance_count, high / instance_count


def instances_interval(target_rps: float, rps_ci95: object, safety_factor: float = 1.0,
                       instance_count: int = 1) -> list[int] | None:
    """The 95 % interval of `instances_needed` from the measured rate's (`rps_ci95`, measured on
    `instance_count` instances): [instances at the high rate, instances at the low rate]; None
    without a rate interval or when its low end is 0 (no bound on the fleet)."""
    bounds = _rate_bounds(rps_ci95, instance_count)
    if bounds is None:
        return None
    fewest, most = instances_needed(target_rps, bounds[1], safety_factor), instances_needed(target_rps, bounds[0],
                                                                                          safety_factor)
    return None if fewest is None or most is None else [fewest, most]


def autoscaling_target_interval(rps_ci95: object, safety_factor: float = DEFAULT_SAFETY_FACTOR,
                                instance_count: int = 1) -> list[float] | None:
    """The 95 % interval of `autoscaling_target` from the measured rate's (it grows with the rate)."""
    bounds = _rate_bounds(rps_ci95, instance_count)
    if bounds is None:
        return None
    return [round(autoscaling_target(rate, safety_factor), 3) for rate in bounds]


class ServerlessCost(TypedDict):
    """A serverless endpoint's estimate at the point's latency (`cost.serverless`)."""

    memory_mb: int
    duration_ms: float
    usd_per_gb_second: float
    usd_per_inference: float
    usd_per_million: float
    formula: str


class Cost(TypedDict, total=False):
    """summary.json's `cost` as the report builds it (docs/summary.md): the price, the point's rate per
    instance, $ per 1M, the autoscaling target, the instances for --target-rps (each with its 95 %
    interval when the rate has one), a serverless estimate, an LLM run's $ per 1M output tokens."""

    instance_type: str | None
    instance_count: int
    price_per_hour_usd: float | None
    price_source: str | None
    rps: float | None
    safety_factor: float
    rps_per_instance: float
    transactions_per_hour: float
    autoscaling_target_invocations_per_instance: float
    autoscaling_target_invocations_per_instance_ci95: list[float] | None
    usd_per_million: float | None
    usd_per_million_ci95: list[float] | None
    usd_per_hour_total: float
    target_rps: float
    instances_needed: int | None
    instances_needed_no_headroom: int | None
    instances_needed_ci95: list[int] | None
    usd_per_hour_at_target: float
    serverless: ServerlessCost
    output_tokens_per_s: float | None
    usd_per_million_output_tokens: float | None


def cost_summary(
    point: SustainablePoint | None,
    *,
    prices: PriceTable,
    instance_type: str | None = None,
    instance_count: int = 1,
    price_per_hour: float | None = None,
    target_rps: float | None = None,
    safety_factor: float = DEFAULT_SAFETY_FACTOR,
    serverless_memory_mb: int | None = None,
    serverless_duration_ms: float | None = None,
    region: str | None = None,
) -> tuple[Cost, list[str], list[str]]:
    """The `cost` key of summary.json for the sustainable point; returns (cost, gaps, notes).

    A price from the table for a run in another `region` than the table's adds a one-line warning
    to the notes: the table holds one region's approximate prices.
    """
    gaps: list[str] = []
    notes: list[str] = []
    rps = point.rps if point is not None else None
    rate_ci95 = point.rps_ci95 if point is not None else None
    instance_count = instance_count or 1
    priced = prices.lookup(instance_type)
    if price_per_hour is not None:
        source = "--price-per-hour"
    elif priced is not None:
        price_per_hour, source = priced.usd_per_hour, (f"{priced.source} (approximate {prices.region} on-demand price "
                                                       f"as of {prices.as_of}; check the SageMaker pricing page)")
        if region and prices.region and region != prices.region:
            notes.append(f"warning: the price for {instance_type} is the table's approximate {prices.region} price "
                         f"(as of {prices.as_of}), but this run is in {region}, where prices differ; pass "
                         "--price-per-hour or --prices FILE")
    else:
        source = None
        if instance_type:
            gaps.append(f"cost: no price for {instance_type}; pass --price-per-hour or --prices FILE")
        else:
            notes.append("cost: no instance type known; pass --instance-type or "
                         "--price-per-hour for $ per 1M inferences")
    cost: Cost = {
        "instance_type": instance_type,
        "instance_count": instance_count,
        "price_per_hour_usd": price_per_hour,
        "price_source": source,
        "rps": rps,
        "safety_factor": safety_factor,
    }
    if rps:
        per_instance = rps / instance_count
        cost["rps_per_instance"] = per_instance
        cost["transactions_per_hour"] = transactions_per_hour(rps)
        cost["autoscaling_target_invocations_per_instance"] = autoscaling_target(per_instance, safety_factor)
        cost["autoscaling_target_invocations_per_instance_ci95"] = autoscaling_target_interval(
            rate_ci95, safety_factor, instance_count)
        if price_per_hour is not None:
            cost["usd_per_million"] = cost_per_million(price_per_hour, instance_count, rps)
            cost["usd_per_million_ci95"] = cost_interval(price_per_hour, instance_count, rate_ci95)
            cost["usd_per_hour_total"] = price_per_hour * instance_count
        if target_rps:
            cost["target_rps"] = target_rps
            needed = instances_needed(target_rps, per_instance, safety_factor)  # a number: rate and factor > 0
            cost["instances_needed"] = needed
            cost["instances_needed_no_headroom"] = instances_needed(target_rps, per_instance, 1.0)
            cost["instances_needed_ci95"] = instances_interval(target_rps, rate_ci95, safety_factor,
                                                               instance_count)
            if price_per_hour is not None and needed is not None:
                cost["usd_per_hour_at_target"] = price_per_hour * needed
    else:
        gaps.append("cost: no sustainable throughput found, so no $ per 1M inferences")
    if serverless_memory_mb:
        rate = prices.serverless_usd_per_gb_second
        if serverless_duration_ms is None or rate is None:
            gaps.append("cost: serverless estimate needs a duration (ModelLatency or client latency)")
        else:
            per_call = serverless_cost_per_inference(serverless_memory_mb, serverless_duration_ms, rate)
            cost["serverless"] = {
                "memory_mb": serverless_memory_mb,
                "duration_ms": serverless_duration_ms,
                "usd_per_gb_second": rate,
                "usd_per_inference": per_call,
                "usd_per_million": per_call * 1e6,
                "formula": "memory_mb/1024 x ceil(duration_ms)/1000 x usd_per_gb_second",
            }
    return cost, gaps, notes
