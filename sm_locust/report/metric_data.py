"""What a metric source is asked (`MetricRequest`) and what it answers (`MetricResult`).

Why a module of its own: the source registry (`sources.py`) and the CloudWatch fetcher
(`cloudwatch.py`) both speak these types, and the registry builds the fetcher; keeping the types
below both means neither imports the other's importer (no cycle).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd


@dataclass(frozen=True)
class MetricRequest:
    """Which endpoint, over which span (epoch seconds, UTC), at which period."""

    endpoint_name: str
    start: float
    end: float
    variant_name: str = "AllTraffic"
    inference_component: str | None = None
    period: int = 60
    vcpus: int | None = None  # known vCPU count: adds per-vCPU CPU columns
    gpus: int | None = None  # known GPU count: 0 skips GPU metrics, n adds per-GPU columns
    multi_model: bool = False  # a multi-model endpoint's metrics too (ModelCacheHit, LoadedModelCount, ...)
    async_inference: bool = False  # an async endpoint's metrics too (ApproximateBacklogSize, TimeInBacklog, ...)

    def dimensions(self) -> list[dict[str, str]]:
        if self.inference_component:
            return [{"Name": "InferenceComponentName", "Value": self.inference_component}]
        return [{"Name": "EndpointName", "Value": self.endpoint_name},
                {"Name": "VariantName", "Value": self.variant_name}]

    def describe(self) -> str:
        return ", ".join(f"{d['Name']}={d['Value']}" for d in self.dimensions())


@dataclass
class MetricResult:
    """Endpoint metrics in period buckets: `frame` index = bucket start (epoch s), columns cw_*."""

    source: str
    frame: pd.DataFrame | None
    period: int = 60
    fetched: dict[str, int] = field(default_factory=dict)  # column -> datapoints
    gaps: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    complete: bool = False
    data_until: float | None = None  # end of the last bucket any expected metric has

    def as_summary(self) -> dict[str, object]:
        """The `cloudwatch` key of summary.json."""
        return {
            "source": self.source,
            "period_s": self.period,
            "fetched": dict(self.fetched),
            "complete": self.complete,
            "gaps": list(self.gaps),
            "notes": list(self.notes),
        }


def empty_frame():
    """An empty frame of period buckets (index `bucket_s`)."""
    return pd.DataFrame(index=pd.Index([], dtype="int64", name="bucket_s"))
