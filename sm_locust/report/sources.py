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

from typing import Any, Protocol

from sm_locust.report.cloudwatch import fetch_endpoint_metrics
from sm_locust.report.metric_data import MetricRequest, MetricResult, empty_frame
from sm_locust.util.registry import Registry


class MetricSource(Protocol):
    name: str

    def fetch(self, request: MetricRequest) -> MetricResult: ...


METRIC_SOURCES: Registry[type] = Registry("metric source")


@METRIC_SOURCES.register("none", "off")
class NoMetricSource:
    """No endpoint-side metrics (a local endpoint, or --no-cloudwatch)."""

    name = "none"

    def __init__(self, reason: str = "endpoint metrics not requested", **_: object):
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
        return fetch_endpoint_metrics(request, **self.options)


def create_source(name: str, **options: object) -> MetricSource:
    """A metric source by name (or alias) with its options; an unknown name lists the valid ones."""
    return METRIC_SOURCES.get(name)(**options)


__all__ = ["METRIC_SOURCES", "CloudWatchSource", "MetricRequest", "MetricResult", "MetricSource", "NoMetricSource",
           "create_source"]
