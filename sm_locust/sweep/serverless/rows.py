"""A serverless configuration's row: its memory size and MaxConcurrency, and its tests' figures
(written to sweep.json by `rows.Row.as_dict`; docs/serverless.md lists the keys).

The figures keep what was measured once (the stability, concurrency and cold-start figures of
`measure.py`, ModelSetupTime, ModelLatency, the cost of `cost.py`); what is read from them
(warm percentiles, throttle rate at MaxConcurrency callers, capacity, the latency and error rate
the shared vocabulary compares) are properties, so each figure has one home.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sm_locust.sweep.rows import Row
from sm_locust.sweep.serverless.cost import ConfigurationCost
from sm_locust.sweep.serverless.measure import ColdStartFigures, ConcurrencyFigures, StabilityFigures


@dataclass(kw_only=True)
class ServerlessFigures:
    stability: StabilityFigures | None = None
    concurrency: list[ConcurrencyFigures] = field(default_factory=list)
    cold: ColdStartFigures = field(default_factory=ColdStartFigures)
    cold_start_gap_s: float | None = None
    model_setup_time: dict[str, Any] | None = None  # ModelSetupTime: count, average_ms, its source
    model_latency: dict[str, Any] | None = None  # ModelLatency (what serverless bills): count, average_ms, source
    cost: ConfigurationCost = field(default_factory=ConfigurationCost)

    def _warm(self, key: str) -> float | None:
        return getattr(self.stability, key) if self.stability else None

    @property
    def warm_p50_ms(self) -> float | None:
        return self._warm("warm_p50_ms")

    @property
    def warm_p95_ms(self) -> float | None:
        return self._warm("warm_p95_ms")

    @property
    def warm_p99_ms(self) -> float | None:
        return self._warm("warm_p99_ms")

    @property
    def warm_mean_ms(self) -> float | None:
        return self._warm("warm_mean_ms")

    def warm_ci95(self, key: str) -> list[float] | None:
        """The 95 % interval of a warm figure (`warm_p95_ms`, `warm_mean_ms`, ...), or None."""
        return getattr(self.stability, f"{key}_ci95", None) if self.stability else None

    @property
    def throttle_rate(self) -> dict[str, float | None]:
        """Multiplier ('0.5', '1', '2') -> the throttled share of its steady window."""
        return {f"{f.multiplier:g}": f.throttle_rate for f in self.concurrency}

    @property
    def goodput_rps(self) -> dict[str, float | None]:
        return {f"{f.multiplier:g}": f.goodput_rps for f in self.concurrency}

    @property
    def capacity_rps(self) -> float | None:
        """The best goodput of the concurrency test."""
        goodputs = [f.goodput_rps for f in self.concurrency if f.goodput_rps is not None]
        return max(goodputs) if goodputs else None

    @property
    def capacity_rps_ci95(self) -> list[float] | None:
        """The 95 % interval of the best goodput (its phase's)."""
        measured = [f for f in self.concurrency if f.goodput_rps is not None]
        return max(measured, key=lambda f: f.goodput_rps or 0.0).goodput_rps_ci95 if measured else None

    @property
    def throttle_at_max_concurrency(self) -> float | None:
        """The throttle rate with MaxConcurrency callers (multiplier 1, or the largest under it)."""
        at_one = [f for f in self.concurrency if f.multiplier <= 1.0]
        return at_one[-1].throttle_rate if at_one else None

    def as_dict(self) -> dict[str, object]:
        return {
            "stability": self.stability.as_dict() if self.stability else None,
            "concurrency": [f.as_dict() for f in self.concurrency],
            "throttle_rate": self.throttle_rate,
            "goodput_rps": self.goodput_rps,
            "cold_start": {k: v for k, v in self.cold.as_dict().items() if k != "samples_ms"},
            "cold_start_samples_ms": self.cold.samples_ms,
            "cold_start_p50_ms": self.cold.p50_ms,
            "cold_start_p99_ms": self.cold.p99_ms,
            "cold_start_p50_ms_ci95": self.cold.p50_ms_ci95,
            "cold_start_p99_ms_ci95": self.cold.p99_ms_ci95,
            "cold_start_gap_s": self.cold_start_gap_s,
            "warm_p50_ms": self.warm_p50_ms,
            "warm_p95_ms": self.warm_p95_ms,
            "warm_p99_ms": self.warm_p99_ms,
            "warm_mean_ms": self.warm_mean_ms,
            "warm_p50_ms_ci95": self.warm_ci95("warm_p50_ms"),
            "warm_p95_ms_ci95": self.warm_ci95("warm_p95_ms"),
            "warm_p99_ms_ci95": self.warm_ci95("warm_p99_ms"),
            "warm_mean_ms_ci95": self.warm_ci95("warm_mean_ms"),
            "model_setup_time": self.model_setup_time,
            "model_latency": self.model_latency,
            "capacity_rps": self.capacity_rps,
            "capacity_rps_ci95": self.capacity_rps_ci95,
            "throttle_at_max_concurrency": self.throttle_at_max_concurrency,
            "latency_ms": self.warm_p95_ms,  # the shared vocabulary: latency and error rate compared across kinds
            "error_rate": self.throttle_at_max_concurrency,
            **self.cost.as_dict(),
        }


@dataclass(kw_only=True)
class ServerlessRow(Row):
    memory_size_mb: int
    max_concurrency: int
    figures: ServerlessFigures | None = None

    def identity(self) -> dict[str, object]:
        return {"memory_size_mb": self.memory_size_mb, "max_concurrency": self.max_concurrency}
