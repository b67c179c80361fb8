"""The local endpoint publishing to a CloudWatch API (a moto server on 127.0.0.1): what it served
is what CloudWatch holds (within one publishing interval while running, exactly after the final
flush), ModelLatency arrives in µs and reads back in ms through the report's fetcher, a multi-model
endpoint's metrics arrive as AWS names them, and a CloudWatch that cannot be reached costs one
warning line, never the endpoint."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from moto.server import ThreadedMotoServer

from sm_locust.endpoint.modelcache import model_names
from sm_locust.endpoint.multimodel import MultiModelConfig
from sm_locust.report import cloudwatch as cwmod
from sm_locust.report.sources import MetricRequest
from tests.conftest import SAMPLE_PAYLOAD

INTERVAL_S = 1.0
SERVICE_MS = 30.0


@pytest.fixture(scope="module")
def moto_url():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def cloudwatch(url):
    return boto3.client("cloudwatch", region_name="us-east-1", endpoint_url=url,
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def invoke(ep, name: str, fault: str | None = None) -> int:
    headers = {"Content-Type": "application/json"}
    if fault:
        headers["X-Amzn-SageMaker-Custom-Attributes"] = f"sm-locust-fault={fault}"
    req = urllib.request.Request(f"{ep.url}/endpoints/{name}/invocations", data=SAMPLE_PAYLOAD.read_bytes(),
                                 headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def statistic(cw, name: str, stat: str, namespace: str = "AWS/SageMaker", endpoint: str = "cw-ep") -> float | None:
    now = datetime.now(UTC)
    points = cw.get_metric_statistics(
        Namespace=namespace, MetricName=name, Statistics=[stat], Period=3600,
        Dimensions=[{"Name": "EndpointName", "Value": endpoint}, {"Name": "VariantName", "Value": "AllTraffic"}],
        StartTime=now - timedelta(hours=1), EndTime=now + timedelta(minutes=1))["Datapoints"]
    return sum(p[stat] for p in points) if points else None


@pytest.mark.e2e
def test_endpoint_publishes_what_it_served_and_the_report_reads_it(endpoint_factory, moto_url):
    cw = cloudwatch(moto_url)
    ep = endpoint_factory(cloudwatch_url=moto_url, metrics_interval_s=INTERVAL_S, endpoint_name="cw-ep",
                          workers=2, service_time_ms=SERVICE_MS)
    # The report's window is the traffic's (start .. end), in whole minutes, and a minute in it without data is
    # a gap: the traffic starts 3 s or more into a minute (a publishing window is stamped with its start, up
    # to an interval before its requests) with 20 s of it left, so it lands in the minutes the window covers.
    while not 3 <= time.time() % 60 <= 40:
        time.sleep(0.2)
    start = time.time()
    statuses = [invoke(ep, "cw-ep") for _ in range(40)]
    statuses += [invoke(ep, "cw-ep", "ModelError") for _ in range(3)]
    statuses += [invoke(ep, "cw-ep", "InternalFailure") for _ in range(2)]
    end = time.time()
    assert statuses == [200] * 40 + [424] * 3 + [500] * 2
    served = ep.stats()["invocations"]
    assert served == 45

    # while running: everything served is in CloudWatch within one publishing interval (+ slack)
    deadline = time.monotonic() + INTERVAL_S + 3
    while statistic(cw, "Invocations", "Sum") != served and time.monotonic() < deadline:
        time.sleep(0.2)
    assert statistic(cw, "Invocations", "Sum") == served
    assert statistic(cw, "Invocations", "SampleCount") == served
    assert statistic(cw, "ModelLatency", "SampleCount") == 40
    model_us = statistic(cw, "ModelLatency", "Sum") / 40
    assert SERVICE_MS * 1000 <= model_us < SERVICE_MS * 1000 * 3  # microseconds, as SageMaker sends them
    assert statistic(cw, "Invocation4XXErrors", "Sum") == 3 and statistic(cw, "Invocation5XXErrors", "Sum") == 2

    assert ep.stop() == 0
    # after the final flush, the report's fetcher reads it back in report units (ms, pct, count)
    result = cwmod.fetch_endpoint_metrics(MetricRequest("cw-ep", start, end), cloudwatch=cw)
    frame = result.frame
    assert frame["cw_Invocations_sum_count"].sum() == served
    assert frame["cw_InvocationsPerInstance_sum_count"].sum() == served
    latency_ms = frame["cw_ModelLatency_avg_ms"].dropna()
    assert len(latency_ms) and all(SERVICE_MS <= v < SERVICE_MS * 3 for v in latency_ms)
    assert (frame["cw_ModelLatency_max_ms"].dropna() >= SERVICE_MS).all()
    assert (frame["cw_OverheadLatency_avg_ms"].dropna() < SERVICE_MS).all()
    assert frame["cw_Invocation4XXErrors_sum_count"].sum() == 3
    assert frame["cw_CPUUtilization_avg_pct"].max() > 0
    assert 0 < frame["cw_MemoryUtilization_avg_pct"].max() < 100
    assert 0 < frame["cw_DiskUtilization_avg_pct"].max() <= 100
    assert not [g for g in result.gaps if "Invocations" in g or "ModelLatency" in g], result.gaps


@pytest.mark.e2e
def test_unreachable_cloudwatch_costs_one_warning_line_never_the_endpoint(endpoint_factory, tmp_path, refused_url):
    dead = refused_url  # nothing listens there
    ep = endpoint_factory(cloudwatch_url=dead, metrics_interval_s=INTERVAL_S)
    deadline = time.monotonic() + 3 * INTERVAL_S + 0.5
    statuses = []
    while time.monotonic() < deadline:
        statuses.append(invoke(ep, "any"))
        time.sleep(0.05)
    assert set(statuses) == {200} and ep.process.poll() is None
    assert ep.stop() == 0
    log = (tmp_path / "endpoint0.log").read_text()
    warnings = [line for line in log.splitlines() if "CloudWatch metrics not published" in line]
    assert len(warnings) == 1, log
    assert dead in warnings[0] and "Traceback" not in log


@pytest.mark.e2e
def test_a_multi_model_endpoint_publishes_the_mme_metrics(endpoint_factory, moto_url):
    """m1 m1 m2 m3 m1 with room for two models: 5 lookups, 1 hit, 4 loads, 3 downloads, 2 unloads."""
    cw = cloudwatch(moto_url)
    ep = endpoint_factory(cloudwatch_url=moto_url, metrics_interval_s=INTERVAL_S, endpoint_name="mm-ep",
                          multi_model=MultiModelConfig(model_count=5, memory_mb=200, download_ms=20, load_ms=10))
    m1, m2, m3 = model_names(5)[:3]
    for model in (m1, m1, m2, m3, m1):
        headers = {"Content-Type": "application/json", "X-Amzn-SageMaker-Target-Model": model}
        req = urllib.request.Request(f"{ep.url}/endpoints/mm-ep/invocations", data=SAMPLE_PAYLOAD.read_bytes(),
                                     headers=headers)
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 200
    endpoints_ns = "/aws/sagemaker/Endpoints"
    deadline = time.monotonic() + 60  # a resource reading (about 1 s) and a publication; ends when they are in
    while statistic(cw, "LoadedModelCount", "Maximum", endpoints_ns, "mm-ep") != 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert statistic(cw, "LoadedModelCount", "Maximum", endpoints_ns, "mm-ep") == 2
    assert ep.stop() == 0  # the final flush
    assert statistic(cw, "ModelCacheHit", "SampleCount", endpoint="mm-ep") == 5
    assert statistic(cw, "ModelCacheHit", "Sum", endpoint="mm-ep") == 1
    assert statistic(cw, "ModelLoadingTime", "SampleCount", endpoint="mm-ep") == 4
    assert statistic(cw, "ModelLoadingTime", "Sum", endpoint="mm-ep") == 4 * 10_000  # µs
    assert statistic(cw, "ModelDownloadingTime", "SampleCount", endpoint="mm-ep") == 3
    assert statistic(cw, "ModelUnloadingTime", "SampleCount", endpoint="mm-ep") == 2
    waited_us = statistic(cw, "ModelLoadingWaitTime", "Sum", endpoint="mm-ep")
    assert statistic(cw, "ModelLoadingWaitTime", "SampleCount", endpoint="mm-ep") == 4 and waited_us >= 3 * 30_000


def invoke_async(ep, name: str, location: str) -> int:
    req = urllib.request.Request(f"{ep.url}/endpoints/{name}/async-invocations", data=b"", method="POST",
                                 headers={"Content-Type": "application/json",
                                          "X-Amzn-SageMaker-InputLocation": location})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.status


@pytest.mark.e2e
def test_an_async_endpoint_publishes_its_queue_metrics_and_the_report_reads_them(endpoint_factory, moto_url):
    """6 requests (one with a missing input) on 1 worker of 300 ms: 6 processed, 1 failure, a backlog
    of up to 5 with EndpointName alone, each one's time in the backlog, and no Invocations."""
    from sm_locust.endpoint.asyncqueue import AsyncEndpointConfig

    s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=moto_url,
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    s3.create_bucket(Bucket="async-metrics")
    s3.put_object(Bucket="async-metrics", Key="in.json", Body=SAMPLE_PAYLOAD.read_bytes())
    cw = cloudwatch(moto_url)
    config = AsyncEndpointConfig(output_path="s3://async-metrics/out", max_concurrent=1, s3_url=moto_url)
    ep = endpoint_factory(cloudwatch_url=moto_url, metrics_interval_s=INTERVAL_S, endpoint_name="aq-ep",
                          service_time_ms=300, async_inference=config)
    start = time.time()
    locations = ["s3://async-metrics/in.json"] * 5 + ["s3://async-metrics/missing.json"]
    assert [invoke_async(ep, "aq-ep", loc) for loc in locations] == [202] * 6
    deadline = time.monotonic() + 60
    while (ep.stats()["async_results"] + ep.stats()["async_failures"] < 6) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(2 * INTERVAL_S)  # a gauge reading with the queue empty again
    end = time.time()
    assert ep.stop() == 0  # the final flush
    assert statistic(cw, "InvocationsProcessed", "Sum", endpoint="aq-ep") == 6
    assert statistic(cw, "InvocationFailures", "Sum", endpoint="aq-ep") == 1
    assert statistic(cw, "TimeInBacklog", "SampleCount", endpoint="aq-ep") == 6
    assert statistic(cw, "TimeInBacklog", "Maximum", endpoint="aq-ep") >= 4 * 300_000 * 0.9  # µs: the last waited 4
    assert statistic(cw, "TotalProcessingTime", "Maximum", endpoint="aq-ep") >= 5 * 300 * 0.9  # ms
    assert statistic(cw, "Invocations", "Sum", endpoint="aq-ep") is None  # not published for an async endpoint

    def endpoint_only(name, stat):
        now = datetime.now(UTC)
        points = cw.get_metric_statistics(
            Namespace="AWS/SageMaker", MetricName=name, Statistics=[stat], Period=3600,
            Dimensions=[{"Name": "EndpointName", "Value": "aq-ep"}],
            StartTime=now - timedelta(hours=1), EndTime=now + timedelta(minutes=1))["Datapoints"]
        return max(p[stat] for p in points) if points else None

    assert 1 <= endpoint_only("ApproximateBacklogSize", "Maximum") <= 6
    assert endpoint_only("ApproximateBacklogSizePerInstance", "Maximum") == endpoint_only(
        "ApproximateBacklogSize", "Maximum")
    assert endpoint_only("ApproximateBacklogSize", "Minimum") == 0
    assert endpoint_only("ApproximateAgeOfOldestRequest", "Maximum") > 0
    assert endpoint_only("HasBacklogWithoutCapacity", "Maximum") == 0  # one instance all along
    result = cwmod.fetch_endpoint_metrics(MetricRequest("aq-ep", start, end, async_inference=True), cloudwatch=cw)
    frame = result.frame
    assert frame["cw_InvocationsProcessed_sum_count"].sum() == 6
    assert frame["cw_ApproximateBacklogSize_max_count"].max() >= 1
    assert frame["cw_TimeInBacklog_max_ms"].max() >= 4 * 300 * 0.9
    plain = cwmod.fetch_endpoint_metrics(MetricRequest("aq-ep", start, end), cloudwatch=cw).frame
    assert "cw_ApproximateBacklogSize_max_count" not in plain.columns  # asked for only for an async run
