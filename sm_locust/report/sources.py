"""Where endpoint-side metrics come from: a registry of metric sources.

The report needs the endpoint's view (ModelLatency, CPU) next to the client's (Locust), but where
that view comes from varies: CloudWatch for a real endpoint, nothing for a local one (later maybe
the local endpoint's own counters). A source takes a `MetricRequest` (which endpoint, which time
span) and answers a `MetricResult`: a DataFrame of period buckets plus the gaps it found. Sources
never raise for missing data; a report drawn from what exists beats no report.

Add a source with `@METRIC_SOURCES.register("name")`; `create_source("name", **options)` builds it
and an unknown name lists the valid ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from sm_locust.registry import Registry


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
    frame: Any  # pandas.DataFrame
    period: int = 60
    fetched: dict[str, int] = field(default_factory=dict)  # column -> datapoints
    gaps: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    complete: bool = False
    data_until: float | None = None  # end of the last bucket any expected metric has

    def as_summary(self) -> dict[str, Any]:
        """The `cloudwatch` key of summary.json."""
        return {
            "source": self.source,
            "period_s": self.period,
            "fetched": dict(self.fetched),
            "complete": self.complete,
            "gaps": list(self.gaps),
            "notes": list(self.notes),
        }


class MetricSource(Protocol):
    name: str

    def fetch(self, request: MetricRequest) -> MetricResult: ...


METRIC_SOURCES: Registry[type] = Registry("metric source")


def empty_frame():
    import pandas as pd

    return pd.DataFrame(index=pd.Index([], dtype="int64", name="bucket_s"))


@METRIC_SOURCES.register("none", "off")
class NoMetricSource:
    """No endpoint-side metrics (a local endpoint, or --no-cloudwatch)."""

    name = "none"

    def __init__(self, reason: str = "endpoint metrics not requested", **_: Any):
        self.reason = reason

    def fetch(self, request: MetricRequest) -> MetricResult:
        return MetricResult(self.name, empty_frame(), request.period, notes=[self.reason], complete=True)


@METRIC_SOURCES.register("cloudwatch", "cw")
class CloudWatchSource:
    """Amazon CloudWatch GetMetricData (see `sm_locust.report.cloudwatch`)."""

    name = "cloudwatch"

    def __init__(self, **options: Any):
        self.options = options

    def fetch(self, request: MetricRequest) -> MetricResult:
        from sm_locust.report.cloudwatch import fetch_endpoint_metrics

        return fetch_endpoint_metrics(request, **self.options)


def create_source(name: str, **options: Any) -> MetricSource:
    return METRIC_SOURCES.get(name)(**options)
