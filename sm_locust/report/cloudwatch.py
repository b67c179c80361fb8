"""Fetch a SageMaker endpoint's CloudWatch metrics for the span of a run.

One GetMetricData call carries up to 500 queries and answers up to 100,800 datapoints per page;
the fetcher batches queries by 500 and follows NextToken, so a 24 h run at 60 s fits in a few
calls. The client is injected (`cloudwatch=`); without one the AWS client factory
(`sm_locust.aws.clients`) builds one from region/profile, and botocore itself honours
`AWS_ENDPOINT_URL_CLOUDWATCH` (a moto server or the local endpoint's stand-in), so tests never need
the network.

CloudWatch publishes with a lag of a few minutes. A report asked for right after a run gets what
exists, and the gap is named ("ModelLatency: data up to 14:22 UTC, the run ended 14:25 UTC, 3 min
ago"). `wait=True` polls until every expected metric reaches the run's last minute, or a timeout.

Errors (access denied, no credentials, bad region or endpoint URL) never escape: they become one
line in `MetricResult.gaps`, and the report is drawn from the Locust data alone.

Request spans are aligned to the period (CloudWatch rounds StartTime down to the minute; moto
5.2.5 starts its buckets at StartTime as given, so aligning ourselves gives the same buckets on
both).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pandas as pd
from botocore import exceptions as bx
from botocore.exceptions import BotoCoreError, ClientError

from sm_locust.aws.clients import LOCAL_DEFAULT_REGION, Purpose, is_loopback
from sm_locust.aws.clients import client as aws_client
from sm_locust.aws.region import NO_REGION
from sm_locust.report.metric_data import MetricRequest, MetricResult, empty_frame
from sm_locust.report.metrics import (
    ASYNC_METRICS,
    INFERENCE_COMPONENTS_NS,
    METRICS,
    MULTI_MODEL_METRICS,
    MetricDef,
    per_unit_column,
)

MAX_QUERIES_PER_CALL = 500
LAG_WINDOW_S = 20 * 60  # data missing at the end of a run that ended this recently may still come
DEFAULT_WAIT_TIMEOUT_S = 15 * 60
DEFAULT_POLL_S = 30.0

Progress = Callable[[str], None]


def make_client(region: str | None = None, profile: str | None = None):
    """A CloudWatch client for reading metrics: short timeouts and one retry (a report must not hang).
    Aimed at a loopback stand-in (AWS_ENDPOINT_URL_CLOUDWATCH: moto, the demo's), it gets a region when
    none is set; the factory gives it placeholder keys when none are found, as for a local endpoint."""
    local = is_loopback(os.environ.get("AWS_ENDPOINT_URL_CLOUDWATCH") or os.environ.get("AWS_ENDPOINT_URL"))
    return aws_client("cloudwatch", Purpose.READ, region=region, profile=profile,
                      default_region=LOCAL_DEFAULT_REGION if local else None)


def select_metrics(request: MetricRequest, metrics: tuple[MetricDef, ...] = METRICS) -> list[MetricDef]:
    """Metrics worth asking for: GPU metrics are skipped when the instance is known to have none; a
    multi-model endpoint's (`request.multi_model`) and an async endpoint's (`request.async_inference`) are added."""
    if request.multi_model and not request.inference_component:
        metrics = (*metrics, *MULTI_MODEL_METRICS)
    if request.async_inference and not request.inference_component:  # an async endpoint's own (report/metrics.py)
        metrics = (*metrics, *ASYNC_METRICS)
    return [m for m in metrics if not (m.gpu and request.gpus == 0)]


def build_queries(request: MetricRequest, metrics: list[MetricDef]) -> list[tuple[MetricDef, str, dict]]:
    """(metric, stat, MetricDataQuery) for each metric x statistic; ids are m0, m1, ..."""
    out: list[tuple[MetricDef, str, dict]] = []
    dims = request.dimensions()
    for metric in metrics:
        namespace, name = metric.namespace, metric.name
        metric_dims = [d for d in dims if d.get("Name") == "EndpointName"] if metric.endpoint_only else dims
        if request.inference_component and namespace != "AWS/SageMaker":
            namespace, name = INFERENCE_COMPONENTS_NS, metric.ic_name or metric.name
        for stat in metric.stats:
            query = {
                "Id": f"m{len(out)}",
                "MetricStat": {
                    "Metric": {"Namespace": namespace, "MetricName": name, "Dimensions": metric_dims},
                    "Period": request.period,
                    "Stat": stat,
                },
                "ReturnData": True,
            }
            out.append((metric, stat, query))
    return out


def aligned_span(request: MetricRequest) -> tuple[int, int]:
    """[start, end) aligned outward to the period: every bucket the run touched."""
    p = request.period
    start = int(math.floor(request.start / p) * p)
    end = int(math.ceil(request.end / p) * p)
    return start, max(end, start + p)


def get_metric_data(cloudwatch, queries: list[dict], start: int, end: int) -> tuple[dict[str, list], list[str]]:
    """Run GetMetricData over all queries: batches of 500, every NextToken page.

    Returns {query id: [(epoch s, value), ...] sorted by time} and the per-result problems
    (status Forbidden/InternalError, service messages) as text.
    """
    points: dict[str, list] = {q["Id"]: [] for q in queries}
    problems: list[str] = []
    for i in range(0, len(queries), MAX_QUERIES_PER_CALL):
        batch = queries[i : i + MAX_QUERIES_PER_CALL]
        kwargs: dict[str, object] = {
            "MetricDataQueries": batch,
            "StartTime": datetime.fromtimestamp(start, UTC),
            "EndTime": datetime.fromtimestamp(end, UTC),
            "ScanBy": "TimestampAscending",
        }
        while True:
            page = cloudwatch.get_metric_data(**kwargs)
            for res in page.get("MetricDataResults", []):
                pid = res.get("Id")
                if pid not in points:
                    continue
                for ts, value in zip(res.get("Timestamps", []), res.get("Values", []), strict=True):
                    points[pid].append((_epoch(ts), float(value)))
                status = res.get("StatusCode", "Complete")
                if status in ("Forbidden", "InternalError"):
                    detail = "; ".join(m.get("Value", "") for m in res.get("Messages", []) or [])
                    problems.append(f"{pid}: {status}{': ' + detail if detail else ''}")
            for msg in page.get("Messages", []) or []:
                problems.append(f"{msg.get('Code', '')}: {msg.get('Value', '')}".strip(": "))
            token = page.get("NextToken")
            if not token:
                break
            kwargs["NextToken"] = token
    for pid in points:
        points[pid].sort()
    return points, problems


def _epoch(ts) -> float:
    if isinstance(ts, datetime):
        if ts.tzinfo is None:
            ts = ts.replace(tzinfo=UTC)
        return ts.timestamp()
    return float(ts)


def to_frame(specs: list[tuple[MetricDef, str, dict]], points: dict[str, list], request: MetricRequest):
    """Pure: raw points -> DataFrame (index bucket start, epoch s) in report units.

    Values are scaled (µs -> ms); summed-over-cores percentages get per-vCPU / per-GPU companion
    columns when the count is known. Points are snapped to their bucket start.
    """
    start, end = aligned_span(request)
    p = request.period
    index = pd.Index(range(start, end, p), dtype="int64", name="bucket_s")
    columns: dict[str, pd.Series] = {}
    for metric, stat, query in specs:
        pts = points.get(query["Id"], [])
        col = metric.column(stat)
        if pts:
            buckets = [int(t // p * p) for t, _ in pts]
            series = pd.Series([v * metric.scale for _, v in pts], index=buckets, dtype="float64")
            series = series[~series.index.duplicated(keep="last")].reindex(index)
        else:
            series = pd.Series(float("nan"), index=index, dtype="float64")
        columns[col] = series
        count = {"vcpu": request.vcpus, "gpu": request.gpus}.get(metric.per_unit or "", None)
        if metric.per_unit and count:
            columns[per_unit_column(metric, stat)] = series / count
    if not columns:
        return empty_frame()
    return pd.DataFrame(columns, index=index)


def _hm(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M")


def assess(specs: list[tuple[MetricDef, str, dict]], frame, request: MetricRequest,
           now: float) -> tuple[list[str], list[str], bool, float | None]:
    """Pure: name what is missing. Returns (gaps, notes, complete, data_until).

    `complete` means every expected metric has its first and last bucket of the run. Missing
    data at the end of a run that ended less than LAG_WINDOW_S ago is explained as CloudWatch's
    publishing lag.
    """
    gaps: list[str] = []
    notes: list[str] = []
    p = request.period
    start, end = aligned_span(request)
    n_buckets = (end - start) // p
    complete = True
    until: float | None = None
    ago_min = max(0.0, (now - request.end) / 60)
    recent = now - request.end < LAG_WINDOW_S
    seen: set[str] = set()
    for metric, stat, _ in specs:
        if metric.name in seen:
            continue  # judge a metric once, by its first statistic
        seen.add(metric.name)
        col = metric.column(stat)
        have = frame[col].dropna() if col in frame.columns else None
        if have is None or have.empty:
            if metric.expected:
                complete = False
                why = (f"the run ended {ago_min:.0f} min ago and CloudWatch publishes with a lag of a few "
                       "minutes: rerun later or pass --wait") if recent else f"check {request.describe()}"
                gaps.append(f"CloudWatch {metric.name}: no data ({why})")
            else:
                notes.append(f"CloudWatch {metric.name}: no data (normal for this endpoint type)")
            continue
        last = int(have.index.max())
        if metric.expected:
            until = last + p if until is None else min(until, last + p)
        missing_tail = last < end - p
        holes = int(frame[col].loc[start:last].isna().sum())
        if metric.expected and missing_tail:
            complete = False
            if recent:
                gaps.append(f"CloudWatch {metric.name}: data up to {_hm(last + p)} UTC, the run ended "
                            f"{_hm(request.end)} UTC ({ago_min:.0f} min ago); CloudWatch publishes with a "
                            "lag of a few minutes: rerun later or pass --wait")
            else:
                gaps.append(f"CloudWatch {metric.name}: no data after {_hm(last + p)} UTC "
                            f"(the run ended {_hm(request.end)} UTC)")
        if metric.expected and holes > 0:
            gaps.append(f"CloudWatch {metric.name}: {holes} of {n_buckets} minute(s) missing inside the run")
    return gaps, notes, complete, until


def _describe_error(exc: Exception, request: MetricRequest) -> str:
    """One line for the user; never includes credentials."""
    if isinstance(exc, bx.ClientError):
        code = exc.response.get("Error", {}).get("Code", "")
        msg = exc.response.get("Error", {}).get("Message", "")
        if "AccessDenied" in code or code in ("UnauthorizedOperation", "AuthorizationError"):
            return f"CloudWatch: access denied for cloudwatch:GetMetricData ({code}); the report uses Locust data only"
        if code in ("InvalidClientTokenId", "UnrecognizedClientException", "ExpiredToken", "ExpiredTokenException",
                    "SignatureDoesNotMatch"):
            return f"CloudWatch: the AWS credentials were refused ({code}); the report uses Locust data only"
        return f"CloudWatch: {code or 'error'}: {msg}".rstrip(": ")
    if isinstance(exc, bx.NoRegionError):
        return f"CloudWatch: {NO_REGION.format(what='')}"
    if isinstance(exc, bx.NoCredentialsError):
        return "CloudWatch: no AWS credentials found; configure a profile or pass --no-cloudwatch"
    if isinstance(exc, bx.ProfileNotFound):
        return f"CloudWatch: {exc}"
    if isinstance(exc, (bx.EndpointConnectionError, bx.ConnectTimeoutError)):
        return f"CloudWatch: cannot connect ({exc}); check --region or AWS_ENDPOINT_URL_CLOUDWATCH"
    if isinstance(exc, bx.BotoCoreError):
        return f"CloudWatch: {exc}"
    return f"CloudWatch: {type(exc).__name__}: {exc}"


def fetch_once(request: MetricRequest, cloudwatch, now: float) -> MetricResult:
    specs = build_queries(request, select_metrics(request))
    start, end = aligned_span(request)
    points, problems = get_metric_data(cloudwatch, [q for _, _, q in specs], start, end)
    frame = to_frame(specs, points, request)
    gaps, notes, complete, until = assess(specs, frame, request, now)
    gaps.extend(f"CloudWatch: {p}" for p in problems)
    if request.gpus == 0:
        notes.append("CloudWatch: GPU metrics skipped (the instance type has no GPU)")
    fetched = {col: int(frame[col].notna().sum()) for col in frame.columns}
    return MetricResult("cloudwatch", frame, request.period, fetched, gaps, notes, complete and not problems, until)


def fetch_endpoint_metrics(
    request: MetricRequest,
    *,
    cloudwatch=None,
    region: str | None = None,
    profile: str | None = None,
    wait: bool = False,
    wait_timeout: float = DEFAULT_WAIT_TIMEOUT_S,
    poll_every: float = DEFAULT_POLL_S,
    progress: Progress | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> MetricResult:
    """Fetch the run's metrics; with `wait`, poll until complete or `wait_timeout` seconds.

    Never raises for AWS trouble: the result then has no data and one gap line saying why.
    """
    say = progress or (lambda _msg: None)
    try:
        client = cloudwatch if cloudwatch is not None else make_client(region, profile)
        started = clock()
        while True:
            result = fetch_once(request, client, clock())
            if result.complete or not wait:
                return result
            waited = clock() - started
            if clock() - request.end > LAG_WINDOW_S:
                result.notes.append("not waiting: the run ended long ago, missing data will not arrive")
                return result
            if waited >= wait_timeout:
                result.gaps.append(f"CloudWatch: gave up waiting after {waited:.0f} s (--wait timeout)")
                return result
            have = len([c for c, n in result.fetched.items() if n])
            until = _hm(result.data_until) if result.data_until else "nothing yet"
            say(f"waiting for CloudWatch: {have}/{len(result.fetched)} series have data, complete up to "
                f"{until} UTC, run ended {_hm(request.end)} UTC ({waited:.0f}/{wait_timeout:.0f} s)")
            sleep(min(poll_every, max(0.0, wait_timeout - waited)))
    except (BotoCoreError, ClientError) as exc:  # AWS trouble degrades to a gap, never kills the report
        return MetricResult("cloudwatch", empty_frame(), request.period, gaps=[_describe_error(exc, request)])
