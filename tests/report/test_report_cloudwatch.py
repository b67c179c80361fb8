"""CloudWatch fetch: a moto server on 127.0.0.1 seeded with put_metric_data (alignment, µs -> ms),
botocore's Stubber for the exact response shapes moto does not produce (NextToken pages, access
denied), and small fakes for batching, lag and --wait polling.

moto 5.2.5 notes (docs/facts.md): GetMetricData ignores MaxDatapoints (never pages), answers
`Stat="p99"` with a 500 (so the report asks only Average/Maximum/Sum), and starts buckets at the
StartTime given (the fetcher aligns StartTime to the period, as CloudWatch does).
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest
from botocore.stub import ANY, Stubber
from moto.server import ThreadedMotoServer

from sm_locust.report import cloudwatch as cwmod
from sm_locust.report.sources import MetricRequest, create_source

GOLDEN = Path(__file__).parent.parent / "data" / "report" / "golden"
BASE = 1704110400  # 2024-01-01T12:00:00Z
DIMS = [{"Name": "EndpointName", "Value": "golden-ep"}, {"Name": "VariantName", "Value": "AllTraffic"}]

# (namespace, metric) -> {minute offset: [values published in that minute, CloudWatch units]}
SEED = {
    ("AWS/SageMaker", "ModelLatency"): {0: [70_000, 80_000, 90_000], 1: [100_000, 100_000]},
    ("AWS/SageMaker", "OverheadLatency"): {0: [5_000, 5_000, 5_000], 1: [6_000]},
    ("AWS/SageMaker", "Invocations"): {0: [10, 10, 20], 1: [50, 50]},
    ("AWS/SageMaker", "InvocationsPerInstance"): {0: [10, 10, 20], 1: [50, 50]},
    ("/aws/sagemaker/Endpoints", "CPUUtilization"): {0: [120, 150, 180], 1: [250, 350]},
    ("/aws/sagemaker/Endpoints", "MemoryUtilization"): {0: [40, 42], 1: [50]},
}


@pytest.fixture(scope="module")
def moto_url():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    client = boto3.client("cloudwatch", region_name="us-east-1", endpoint_url=url,
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    for (namespace, name), minutes in SEED.items():
        data = []
        for minute, values in minutes.items():
            for i, v in enumerate(values):
                ts = datetime.fromtimestamp(BASE + 60 * minute + 5 + 15 * i, UTC)
                data.append({"MetricName": name, "Dimensions": DIMS, "Timestamp": ts, "Value": float(v)})
        client.put_metric_data(Namespace=namespace, MetricData=data)
    yield url
    server.stop()


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch):
    """Any client built without an explicit endpoint lands on a closed loopback port, never AWS."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_CLOUDWATCH", "http://127.0.0.1:9")


def moto_client(url):
    return boto3.client("cloudwatch", region_name="us-east-1", endpoint_url=url,
                        aws_access_key_id="testing", aws_secret_access_key="testing")


@pytest.mark.e2e
def test_moto_alignment_and_units(moto_url):
    # a run from 12:00:56 to 12:01:06: the span is aligned out to 12:00 .. 12:02
    request = MetricRequest("golden-ep", BASE + 56, BASE + 66, vcpus=4, gpus=0)
    result = cwmod.fetch_endpoint_metrics(request, cloudwatch=moto_client(moto_url), clock=lambda: BASE + 86400)
    f = result.frame
    assert list(f.index) == [BASE, BASE + 60]
    assert f.loc[BASE, "cw_ModelLatency_avg_ms"] == pytest.approx(80.0)
    assert f.loc[BASE, "cw_ModelLatency_max_ms"] == pytest.approx(90.0)
    assert f.loc[BASE + 60, "cw_ModelLatency_avg_ms"] == pytest.approx(100.0)
    assert f.loc[BASE, "cw_OverheadLatency_avg_ms"] == pytest.approx(5.0)
    assert f.loc[BASE, "cw_Invocations_sum_count"] == 40 and f.loc[BASE + 60, "cw_Invocations_sum_count"] == 100
    assert f.loc[BASE, "cw_CPUUtilization_avg_pct"] == 150 and f.loc[BASE + 60, "cw_CPUUtilization_max_pct"] == 350
    assert f.loc[BASE + 60, "cw_CPUUtilizationPerVCPU_avg_pct"] == 75
    assert result.complete and result.gaps == []
    assert result.fetched["cw_ModelLatency_avg_ms"] == 2
    assert any("DiskUtilization: no data (normal" in n for n in result.notes)
    assert any("GPU metrics skipped" in n for n in result.notes)


@pytest.mark.e2e
def test_moto_missing_tail_is_named(moto_url):
    # the run went on to 12:04: CloudWatch has nothing after 12:02 and the run ended long ago
    request = MetricRequest("golden-ep", BASE + 56, BASE + 240, gpus=0)
    result = cwmod.fetch_endpoint_metrics(request, cloudwatch=moto_client(moto_url), clock=lambda: BASE + 86400)
    assert not result.complete
    assert "CloudWatch ModelLatency: no data after 12:02 UTC (the run ended 12:04 UTC)" in result.gaps


@pytest.mark.e2e
def test_moto_unknown_endpoint_means_no_data(moto_url):
    request = MetricRequest("other-ep", BASE, BASE + 120, gpus=0)
    result = cwmod.fetch_endpoint_metrics(request, cloudwatch=moto_client(moto_url), clock=lambda: BASE + 86400)
    assert result.frame["cw_ModelLatency_avg_ms"].isna().all()
    assert any(g.startswith("CloudWatch ModelLatency: no data (check EndpointName=other-ep") for g in result.gaps)


def _stubbed():
    client = boto3.client("cloudwatch", region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    return client, Stubber(client)


def test_stubber_pages_follow_next_token():
    client, stub = _stubbed()
    t = lambda s: datetime.fromtimestamp(s, UTC)  # noqa: E731
    queries = [{"Id": "m0", "MetricStat": {"Metric": {"Namespace": "AWS/SageMaker", "MetricName": "ModelLatency",
                                                      "Dimensions": DIMS}, "Period": 60, "Stat": "Average"}}]
    stub.add_response("get_metric_data", {
        "MetricDataResults": [{"Id": "m0", "Label": "l", "Timestamps": [t(BASE + 60)], "Values": [2000.0],
                               "StatusCode": "PartialData"}], "NextToken": "page2"},
        {"MetricDataQueries": queries, "StartTime": ANY, "EndTime": ANY, "ScanBy": "TimestampAscending"})
    stub.add_response("get_metric_data", {
        "MetricDataResults": [{"Id": "m0", "Label": "l", "Timestamps": [t(BASE)], "Values": [1000.0],
                               "StatusCode": "Complete"}]},
        {"MetricDataQueries": queries, "StartTime": ANY, "EndTime": ANY, "ScanBy": "TimestampAscending",
         "NextToken": "page2"})
    with stub:
        points, problems = cwmod.get_metric_data(client, queries, BASE, BASE + 120)
    stub.assert_no_pending_responses()
    assert points == {"m0": [(BASE, 1000.0), (BASE + 60, 2000.0)]} and problems == []


def test_stubber_access_denied_is_one_line_gap():
    client, stub = _stubbed()
    stub.add_client_error("get_metric_data", service_error_code="AccessDeniedException",
                          service_message="User is not authorized", http_status_code=403)
    with stub:
        result = cwmod.fetch_endpoint_metrics(MetricRequest("ep", BASE, BASE + 60), cloudwatch=client)
    assert result.gaps == ["CloudWatch: access denied for cloudwatch:GetMetricData (AccessDeniedException); "
                           "the report uses Locust data only"]
    assert result.frame.empty


def test_stubber_forbidden_result_status():
    client, stub = _stubbed()
    stub.add_response("get_metric_data", {"MetricDataResults": [
        {"Id": "m0", "Timestamps": [], "Values": [], "StatusCode": "Forbidden",
         "Messages": [{"Code": "Forbidden", "Value": "no access to namespace"}]}]})
    with stub:
        points, problems = cwmod.get_metric_data(client, [{"Id": "m0"}], BASE, BASE + 60)
    assert problems == ["m0: Forbidden: no access to namespace"]


class FakeCloudWatch:
    """Answers every query with one value per minute up to `until` (epoch s, exclusive)."""

    def __init__(self, until):
        self.until = until
        self.calls = []

    def get_metric_data(self, **kw):
        self.calls.append(kw)
        start, end = int(kw["StartTime"].timestamp()), int(kw["EndTime"].timestamp())
        stamps = [datetime.fromtimestamp(s, UTC) for s in range(start, min(end, self.until), 60)]
        return {"MetricDataResults": [{"Id": q["Id"], "Timestamps": stamps, "Values": [1000.0] * len(stamps),
                                       "StatusCode": "Complete"} for q in kw["MetricDataQueries"]]}


def test_batches_of_500_queries():
    fake = FakeCloudWatch(BASE + 120)
    queries = [{"Id": f"m{i}"} for i in range(1200)]
    points, _ = cwmod.get_metric_data(fake, queries, BASE, BASE + 120)
    assert [len(c["MetricDataQueries"]) for c in fake.calls] == [500, 500, 200]
    assert len(points) == 1200 and points["m1199"] == [(BASE, 1000.0), (BASE + 60, 1000.0)]


def test_recent_run_gap_names_the_lag():
    fake = FakeCloudWatch(BASE + 180)  # data up to 12:03; the run ended 12:05:30, now is 12:08
    request = MetricRequest("ep", BASE, BASE + 330, gpus=0)
    result = cwmod.fetch_endpoint_metrics(request, cloudwatch=fake, clock=lambda: BASE + 480)
    assert not result.complete
    gap = next(g for g in result.gaps if g.startswith("CloudWatch ModelLatency"))
    assert gap == ("CloudWatch ModelLatency: data up to 12:03 UTC, the run ended 12:05 UTC (2 min ago); CloudWatch "
                   "publishes with a lag of a few minutes: rerun later or pass --wait")


def test_wait_polls_until_complete_with_progress():
    now = {"t": BASE + 360}
    fake = FakeCloudWatch(BASE + 180)
    lines = []

    def sleep(s):
        now["t"] += s
        fake.until += 120  # two more minutes published per poll

    request = MetricRequest("ep", BASE, BASE + 330, gpus=0)
    result = cwmod.fetch_endpoint_metrics(request, cloudwatch=fake, wait=True, wait_timeout=600, poll_every=30,
                                          progress=lines.append, clock=lambda: now["t"], sleep=sleep)
    assert result.complete and result.gaps == []
    assert len(fake.calls) == 3 and len(lines) == 2
    assert lines[0].startswith("waiting for CloudWatch:") and "complete up to 12:03 UTC" in lines[0]


def test_wait_gives_up_at_timeout():
    now = {"t": BASE + 360}
    fake = FakeCloudWatch(BASE + 180)

    def sleep(s):
        now["t"] += s

    result = cwmod.fetch_endpoint_metrics(MetricRequest("ep", BASE, BASE + 330, gpus=0), cloudwatch=fake, wait=True,
                                          wait_timeout=60, poll_every=30, clock=lambda: now["t"], sleep=sleep)
    assert not result.complete and "gave up waiting after 60 s" in result.gaps[-1]


def test_unreachable_endpoint_is_a_gap(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL_CLOUDWATCH", "http://127.0.0.1:9")  # closed port
    result = create_source("cloudwatch", region="us-east-1").fetch(MetricRequest("ep", BASE, BASE + 60))
    assert len(result.gaps) == 1 and result.gaps[0].startswith("CloudWatch: cannot connect")


def test_inference_component_dimensions():
    request = MetricRequest("ep", BASE, BASE + 60, inference_component="ic-1")
    specs = cwmod.build_queries(request, cwmod.select_metrics(request))
    q = {(m.name, s): q["MetricStat"]["Metric"] for m, s, q in specs}
    assert q[("ModelLatency", "Average")]["Dimensions"] == [{"Name": "InferenceComponentName", "Value": "ic-1"}]
    assert q[("CPUUtilization", "Average")]["Namespace"] == "/aws/sagemaker/InferenceComponents"
    assert q[("CPUUtilization", "Average")]["MetricName"] == "CPUUtilizationNormalized"
    assert len({x["Id"] for _, _, x in specs}) == len(specs)


# ------------------------------------------------------------------------------------ end to end


@pytest.mark.e2e
def test_cli_report_with_moto_is_complete(moto_url, tmp_path, monkeypatch, capsys):
    from sm_locust.cli import main

    run = tmp_path / "run"
    shutil.copytree(GOLDEN, run)
    hist = run / "locust_stats_history.csv"
    hist.write_text(hist.read_text().rsplit("\n", 1)[0] + "\n")  # drop the cut line: a clean run
    monkeypatch.setenv("AWS_ENDPOINT_URL_CLOUDWATCH", moto_url)
    code = main(["report", str(run), "--instance-type", "ml.c5.xlarge", "--target-rps", "100"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"html: {run / 'report.html'}" in out and "CloudWatch on:" in out
    import pandas as pd

    steps = pd.read_csv(run / "steps.csv")
    assert steps.loc[0, "cw_ModelLatency_avg_ms"] == pytest.approx(84.0)
    assert steps.loc[0, "network_client_ms"] == pytest.approx(22.0)  # over the minutes the step touches
    assert steps.loc[1, "cw_CPUUtilizationPerVCPU_avg_pct"] == pytest.approx(75.0)
    import json

    summary = json.loads((run / "summary.json").read_text())
    assert summary["cloudwatch"]["complete"] is True and summary["cloudwatch"]["fetched"]["cw_ModelLatency_avg_ms"] == 2
    assert summary["cost"]["instances_needed"] == 10 and summary["plateau"]["users"] == 2
    page = (run / "report.html").read_text()
    for div in ("fig-endpoint-load", "fig-decomposition"):
        assert f'Plotly.newPlot(                        "{div}"' in page or f'"{div}",' in page
    assert "None: all data present." in page and "= 84.0 +" not in page  # plateau is step 2
    assert "128.0 = 100.0 + 6.0 + 22.0 ms over 12:01:00-12:01:06 UTC" in page  # the minutes step 2 touches


def test_no_region_is_a_gap(monkeypatch, tmp_path):
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_ENDPOINT_URL_CLOUDWATCH", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    result = create_source("cloudwatch").fetch(MetricRequest("ep", BASE, BASE + 60))
    assert result.gaps == ["CloudWatch: no AWS region: pass --region, or set AWS_REGION or AWS_DEFAULT_REGION, or give "
                           "the AWS profile a region (aws configure set region us-east-1)"]


def test_a_loopback_cloudwatch_gets_a_region_and_placeholder_credentials(monkeypatch, tmp_path):
    """A moto stand-in (AWS_ENDPOINT_URL_CLOUDWATCH on this machine) needs neither: the local rule of
    `sm-locust run`; an AWS URL keeps the user's chain (no region: none made up)."""
    from sm_locust.config.preflight import LOCAL_CREDENTIALS
    from sm_locust.report.cloudwatch import make_client

    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_ENDPOINT_URL_CLOUDWATCH", "http://127.0.0.1:5000")
    client = make_client()
    assert client.meta.region_name == "us-east-1"
    assert client._request_signer._credentials.access_key == LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"]
    monkeypatch.setenv("AWS_ENDPOINT_URL_CLOUDWATCH", "https://monitoring.example.com")
    with pytest.raises(Exception, match="region"):
        make_client()
