"""What CloudWatch holds of a run's published metrics, against its summary.json: one line for
`sm-locust demo` and `sm-locust report`.

`read_published` asks CloudWatch (GetMetricStatistics over the run's window, ListMetrics for the
per-error Failures) for the run's EndToEndLatency SampleCount / Sum / Maximum, Requests and Failures
by error; `compare` words the relation the publisher guarantees: latency samples = summary.json's
requests (plus at most those in flight at the stop, which a worker may still report), Failures per
error = summary.json's errors by code. Real CloudWatch takes a few minutes to show new data points:
fewer samples than requests right after a run reads "so far", not "wrong".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sm_locust.aws.clients import AwsClient
from sm_locust.publish.error_names import fold_like
from sm_locust.publish.metric_data import ERROR_DIMENSION
from sm_locust.record.model import JsonObject, Summary, Totals

MAX_POINTS = 1440  # GetMetricStatistics answers at most 1,440 data points per call


@dataclass(frozen=True)
class Published:
    """What CloudWatch holds of a run: its EndToEndLatency samples, their sum and maximum, Failures by error."""

    samples: int
    sum_ms: float
    max_ms: float | None = None
    errors: dict[str, int] = field(default_factory=dict)


def _window(summary: Summary) -> tuple[datetime, datetime, int]:
    start = datetime.fromisoformat(str(summary.started_at).replace("Z", "+00:00"))
    end = datetime.fromisoformat(str(summary.ended_at).replace("Z", "+00:00"))
    minutes = max(1.0, (end - start).total_seconds() / 60 + 4)
    period = 60 * max(1, math.ceil(minutes / MAX_POINTS))
    return start - timedelta(seconds=period + 60), end + timedelta(seconds=period + 60), period


def read_published(cloudwatch: AwsClient, summary: Summary | JsonObject) -> Published | None:
    """The run's published figures as CloudWatch holds them; None when summary.json shows no publishing."""
    record = Summary.of(summary)
    report = (record.publish or {}).get("cloudwatch")
    if not report:
        return None
    namespace = report["namespace"]
    dims = [{"Name": k, "Value": v} for k, v in (report.get("dimensions") or {}).items()]
    start, end, period = _window(record)

    def points(metric: str, stats: list[str], dimensions: list[dict]) -> list[dict]:
        return cloudwatch.get_metric_statistics(Namespace=namespace, MetricName=metric, Dimensions=dimensions,
                                                StartTime=start, EndTime=end, Period=period,
                                                Statistics=stats)["Datapoints"]

    latency = points("EndToEndLatency", ["SampleCount", "Sum", "Maximum"], dims)
    errors: dict[str, int] = {}
    wanted = {(d["Name"], d["Value"]) for d in dims}
    listed = cloudwatch.list_metrics(Namespace=namespace, MetricName="Failures", Dimensions=dims)["Metrics"]
    for metric in listed:
        own = {(d["Name"], d["Value"]) for d in metric.get("Dimensions") or []}
        extra = own - wanted
        if len(extra) == 1 and next(iter(extra))[0] == ERROR_DIMENSION and wanted <= own:
            code = next(iter(extra))[1]
            errors[code] = round(sum(p["Sum"] for p in points("Failures", ["Sum"], metric["Dimensions"])))
    return Published(samples=round(sum(p["SampleCount"] for p in latency)), sum_ms=sum(p["Sum"] for p in latency),
                     max_ms=max((p["Maximum"] for p in latency), default=None), errors=dict(sorted(errors.items())))


def compare(published: Published, summary: Summary | JsonObject) -> tuple[bool, str]:
    """(equal, one line): CloudWatch's figures against summary.json's totals."""
    totals = Summary.of(summary).totals or Totals()
    requests = int(totals.requests or 0)
    in_flight = int(totals.in_flight_at_stop or 0)
    samples = int(published.samples or 0)
    errors = fold_like(dict(published.errors), totals.errors or {})  # as published: a bounded set
    same_count = requests <= samples <= requests + in_flight
    same_errors = dict(published.errors) == errors
    mean = published.sum_ms / samples if samples else None
    text = (f"CloudWatch holds {samples:,} EndToEndLatency samples for summary.json's {requests:,} requests"
            + (f" (+{in_flight} in flight at the stop)" if in_flight else ""))
    if mean is not None:
        text += f", mean {mean:.1f} ms, max {published.max_ms:.1f} ms"
    if same_count and same_errors:
        return True, text + ", failures by error equal: what was published equals summary.json"
    if samples < requests:
        return False, text + ": not all there yet (CloudWatch shows new data points after a few minutes)"
    return False, text + f"; failures by error: CloudWatch {dict(published.errors)}, summary.json {errors}"


def published_line(summary: Summary | JsonObject, cloudwatch: AwsClient) -> str | None:
    """`compare`'s line for a run that published to CloudWatch (None for one that did not); a failure
    to read CloudWatch back is said in the line, never raised (a report goes on without it)."""
    record = Summary.of(summary)
    if not (record.publish or {}).get("cloudwatch"):
        return None
    try:
        published = read_published(cloudwatch, record)
    except Exception as exc:  # noqa: BLE001 - the report's other parts do not depend on it
        return f"the published metrics could not be read back from CloudWatch ({type(exc).__name__})"
    return compare(published, record)[1] if published is not None else None
