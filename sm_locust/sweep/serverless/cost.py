"""Serverless cost, pure: $ per 1M inferences of a serverless configuration, and the traffic above
which a real-time instance is cheaper (the break-even).

Compute is billed per millisecond at a rate set by the memory size, plus data processed in and out;
`break_even_rps` = price per hour / (3600 x $ per request), None when it lies above the instance's
own `capacity_rps` (serverless then stays cheaper at any rate); a month is 730 hours (formulas:
docs/serverless.md). Prices come from the bundled `sm_locust/report/serverless_prices.json`
(approximate us-east-1, dated), overridden entry by entry by `serverless_prices:` in the sweep file.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sm_locust.errors import UsageError
from sm_locust.report.cost import price_documents

if TYPE_CHECKING:
    from sm_locust.sweep.serverless.spec import CompareInstance

GB = 1024 ** 3  # data processed is priced per GB; bytes / 2^30
HOURS_PER_MONTH = 730  # AWS's pricing month
PRICES_FILE = "serverless_prices.json"


@dataclass
class ServerlessPrices:
    usd_per_second_by_memory_mb: dict[int, float] = field(default_factory=dict)
    usd_per_gb_processed: float = 0.0
    region: str = ""
    as_of: str = ""
    sources: list[str] = field(default_factory=list)

    def per_second(self, memory_mb: int) -> float:
        try:
            return self.usd_per_second_by_memory_mb[int(memory_mb)]
        except KeyError:
            known = ", ".join(str(m) for m in sorted(self.usd_per_second_by_memory_mb))
            raise UsageError(f"no serverless price for {memory_mb} MB in {', '.join(self.sources)} (priced: "
                             f"{known})") from None

    def label(self) -> str:
        return f"approximate {self.region} serverless prices as of {self.as_of}"


def _merge(prices: ServerlessPrices, data: object, source: str) -> None:
    if not isinstance(data, dict):
        raise UsageError(f"serverless price file {source} must hold a JSON object like the bundled {PRICES_FILE}")
    by_memory = data.get("usd_per_second_by_memory_mb") or {}
    if not isinstance(by_memory, dict):
        raise UsageError(f"{source}: usd_per_second_by_memory_mb maps memory sizes (MB) to $ per second")
    for memory, rate in by_memory.items():
        try:
            mb = int(memory)
        except (TypeError, ValueError):
            raise UsageError(f"{source}: usd_per_second_by_memory_mb: {memory!r} is not a memory size in MB") from None
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate < 0:
            raise UsageError(f"{source}: usd_per_second_by_memory_mb.{memory}: expected $ per second, got {rate!r}")
        prices.usd_per_second_by_memory_mb[mb] = float(rate)
    if "usd_per_gb_processed" in data:
        rate = data["usd_per_gb_processed"]
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate < 0:
            raise UsageError(f"{source}: usd_per_gb_processed: expected $ per GB, got {rate!r}")
        prices.usd_per_gb_processed = float(rate)
    prices.region = str(data.get("region", prices.region))
    prices.as_of = str(data.get("as_of", prices.as_of))
    prices.sources.append(source)


def load_serverless_prices(user_file: str | Path | None = None) -> ServerlessPrices:
    """The bundled table, overridden entry by entry by `user_file` when given (report/cost.py reads both)."""
    prices = ServerlessPrices()
    for source, data in price_documents(PRICES_FILE, user_file, "serverless price file"):
        _merge(prices, data, source)
    return prices


@dataclass(frozen=True)
class RequestCost:
    """What one request costs on a serverless configuration."""

    memory_mb: int
    duration_ms: float
    billed_ms: int
    bytes_processed: float
    compute_usd: float
    data_usd: float

    @property
    def usd(self) -> float:
        return self.compute_usd + self.data_usd

    @property
    def per_1m(self) -> float:
        return self.usd * 1e6

    def as_dict(self) -> dict[str, object]:
        return {"memory_mb": self.memory_mb, "duration_ms": self.duration_ms, "billed_ms": self.billed_ms,
                "bytes_processed": self.bytes_processed, "compute_usd_per_1m": self.compute_usd * 1e6,
                "data_usd_per_1m": self.data_usd * 1e6, "usd_per_1m": self.per_1m}


def request_cost(memory_mb: int, duration_ms: float, prices: ServerlessPrices, bytes_in: float = 0.0,
                 bytes_out: float = 0.0) -> RequestCost:
    """One request's compute (duration rounded up to the millisecond) and data processed."""
    billed_ms = math.ceil(duration_ms - 1e-9)
    compute = billed_ms / 1000.0 * prices.per_second(memory_mb)
    processed = float(bytes_in) + float(bytes_out)
    return RequestCost(int(memory_mb), float(duration_ms), billed_ms, processed, compute,
                       processed / GB * prices.usd_per_gb_processed)


def break_even_rps(usd_per_request: float, price_per_hour: float, capacity_rps: float | None = None) -> float | None:
    """The sustained rate above which one real-time instance costs less than serverless; None when
    that rate is more than the instance can serve (`capacity_rps`): then serverless is cheaper at any rate."""
    if not usd_per_request > 0 or price_per_hour is None or price_per_hour < 0:
        return None
    rate = price_per_hour / (3600.0 * usd_per_request)
    if capacity_rps is not None and rate > capacity_rps:
        return None
    return rate


def requests_per_month(rps: float) -> float:
    return rps * 3600.0 * HOURS_PER_MONTH


def monthly_serverless_usd(rps: float, usd_per_request: float) -> float:
    return requests_per_month(rps) * usd_per_request


def monthly_realtime_usd(rps: float, price_per_hour: float, capacity_rps: float | None = None) -> float:
    """One instance, or as many as the rate needs when its capacity is known."""
    instances = max(1, math.ceil(rps / capacity_rps - 1e-9)) if capacity_rps else 1
    return instances * price_per_hour * HOURS_PER_MONTH


def traffic_grid(break_evens: Sequence[float | None], points: int = 60) -> list[float]:
    """Rates (req/s) for the cost-vs-traffic chart: 0 to twice the largest break-even (or 10 req/s)."""
    top = 2.0 * max([b for b in break_evens if b] or [5.0])
    return [top * i / (points - 1) for i in range(points)]


@dataclass(frozen=True)
class ConfigurationCost:
    """A configuration's cost figures: what one request costs (`detail`: its parts, the billed
    duration and where it came from, the prices), per 1M, and the break-even against the real-time
    instance; all None when the billed duration is unknown."""

    cost_per_1m: float | None = None
    break_even_rps: float | None = None
    break_even_requests_per_month: float | None = None
    detail: dict[str, Any] | None = None
    cost_per_1m_ci95: list[float] | None = None  # the same arithmetic at the duration's interval bounds

    def as_dict(self) -> dict[str, object]:
        return {"cost_per_1m": self.cost_per_1m, "cost_per_1m_ci95": self.cost_per_1m_ci95,
                "break_even_rps": self.break_even_rps,
                "break_even_requests_per_month": self.break_even_requests_per_month, "cost": self.detail}


def configuration_cost(memory_mb: int, duration_ms: float | None, source: str, bytes_in: float, bytes_out: float,
                       prices: ServerlessPrices, compare: CompareInstance | None = None,
                       duration_ci95: object = None) -> ConfigurationCost:
    """The cost of a configuration whose requests take `duration_ms` (billed; `source` says whose figure
    it is) and carry `bytes_in` / `bytes_out`; against `compare` (a CompareInstance with a price), the
    break-even rate and its requests a month; with the duration's 95 % interval, $ per 1M's (the
    cost grows with the duration, so its bounds are the bounds' costs, billed from the low bound
    rounded down to the high bound rounded up)."""
    if duration_ms is None:
        return ConfigurationCost()
    interval = None
    if isinstance(duration_ci95, (list, tuple)) and len(duration_ci95) == 2:
        # each request is billed rounded up to the ms, so the mean billed duration lies anywhere from the
        # low bound rounded down to the high bound rounded up: two configurations billed the same whole
        # ms are not told apart by the rounding (nor by a few bytes of data)
        low, high = math.floor(float(duration_ci95[0])), float(duration_ci95[1])
        interval = [request_cost(memory_mb, d, prices, bytes_in, bytes_out).per_1m for d in (low, high)]
    cost = request_cost(memory_mb, duration_ms, prices, bytes_in, bytes_out)
    detail = {**cost.as_dict(), "bytes_in": bytes_in, "bytes_out": bytes_out, "duration_source": source,
              "prices": prices.label()}
    rate = None
    if compare is not None and compare.price_per_hour is not None:
        rate = break_even_rps(cost.usd, compare.price_per_hour, compare.capacity_rps)
    return ConfigurationCost(cost.per_1m, rate, requests_per_month(rate) if rate is not None else None, detail,
                             interval)
