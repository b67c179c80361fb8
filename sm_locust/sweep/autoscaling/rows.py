"""An autoscaling configuration's row: the policy it tested, its price, and what the traffic did to it
(written to sweep.json by `rows.Row.as_dict`; docs/autoscaling.md lists the keys).

The figures keep what was measured once: the `autoscaling` block the run wrote into summary.json
(`scaling.figures.autoscaling_figures`: scale events, instances, instance-hours, cost, seconds over
the SLO, failed, throttled, flaps), the run's totals, and, on the local emulation, the model's scale
events for the same traffic (`scaling.simulate`) and the emulator's own log of instance counts. What
is read from them (the first scale-out's reaction and ready times, the error rate) are properties.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sm_locust.record.model import Autoscaling, ScaleEvent
from sm_locust.sweep.rows import Row

FIGURE_KEYS = ("scale_events", "peak_instances", "instance_hours", "cost_usd", "slo_breach_s", "breach_s_ci95",
               "breach_client_bound_s", "breaches", "failed", "throttled", "flaps", "instances", "periods",
               "duration_s", "first_time_to_result_ms", "awaited")
"""`first_time_to_result_ms` and `awaited` are an async variant's: its cold start from zero, and the calls
accepted that had no result by the end (they count against the error budget as failures do)."""


@dataclass(kw_only=True)
class AutoscalingFigures:
    scaling: Autoscaling = field(default_factory=Autoscaling)  # summary.json `autoscaling` (FIGURE_KEYS and more)
    requests: int | None = None
    failures: int | None = None
    latency_ms: float | None = None  # the objective's percentile over the whole run
    model_events: tuple[ScaleEvent, ...] | None = None  # local: the model's scale events for this traffic
    emulator_instances: list[dict[str, float | int]] | None = None  # local: the emulator's own log, in run seconds
    first_time_to_result_ms: float | None = None  # an async variant's: its first call's time to result (cold start)
    awaited: int | None = None  # an async variant's: calls accepted with no result by the end

    @property
    def first_out(self) -> ScaleEvent | None:
        return next((e for e in self.scaling.scale_events if e.direction == "out"), None)

    @property
    def reaction_s(self) -> float | None:
        return None if self.first_out is None else self.first_out.reaction_s

    @property
    def ready_s(self) -> float | None:
        return None if self.first_out is None else self.first_out.ready_s

    @property
    def reaction_s_ci95(self) -> list[float] | None:
        interval = None if self.first_out is None else self.first_out.reaction_s_ci95
        return None if interval is None else list(interval)

    @property
    def model_out(self) -> ScaleEvent | None:
        return next((e for e in self.model_events or () if e.direction == "out"), None)

    @property
    def error_rate(self) -> float | None:
        """Failed and throttled requests over all of them (an async variant's: and those never answered)."""
        if not self.requests:
            return None
        return ((self.scaling.failed or 0) + (self.scaling.throttled or 0) + (self.awaited or 0)) / self.requests

    def as_dict(self) -> dict[str, object]:
        written = {**self.scaling.to_json(), "first_time_to_result_ms": self.first_time_to_result_ms,
                   "awaited": self.awaited}
        out = {key: written.get(key) for key in FIGURE_KEYS}
        out.update({
            "reaction_s": self.reaction_s, "reaction_s_ci95": self.reaction_s_ci95, "ready_s": self.ready_s,
            "model_reaction_s": None if self.model_out is None else self.model_out.reaction_s,
            "model_ready_s": None if self.model_out is None else self.model_out.ready_s,
            "model_scale_events": None if self.model_events is None else [e.to_json() for e in self.model_events],
            "emulator_instances": self.emulator_instances,
            "requests": self.requests, "failures": self.failures, "latency_ms": self.latency_ms,
            "error_rate": self.error_rate,
        })
        return out


@dataclass(kw_only=True)
class AutoscalingRow(Row):
    policy: dict[str, object]
    price_per_hour: float | None = None
    price_source: str | None = None
    figures: AutoscalingFigures | None = None

    def identity(self) -> dict[str, object]:
        return {"policy": dict(self.policy), "price_per_hour": self.price_per_hour, "price_source": self.price_source}

    def as_dict(self) -> dict[str, object]:
        """The shared row, with `cost_usd` the traffic's (instance-hours x price, what the fleet cost as it
        scaled) and the runner's one-instance billing of the endpoint's life as `deployment_cost_usd`."""
        out = super().as_dict()
        if self.teardown is not None and self.teardown.cost_usd is not None:
            out["deployment_cost_usd"] = self.teardown.cost_usd
        if self.figures is not None:
            out["cost_usd"] = self.figures.scaling.cost_usd
        return out
