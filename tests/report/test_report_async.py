"""The report's "Asynchronous inference" section (report/asyncview.py): the client's figures, the capacity
search, the backlog over time beside CloudWatch's queue metrics, those metrics per step. Pure on a
synthetic summary and frames; then end to end: `serve --async` publishing to a CloudWatch API (conftest's
moto server, S3 too), a run waiting for its results, and `sm-locust report` drawing the endpoint's queue."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from sm_locust.endpoint.asyncqueue import AsyncEndpointConfig
from sm_locust.report.asyncview import FIG_ID, async_section, async_view
from sm_locust.report.cloudwatch import select_metrics
from sm_locust.report.sources import MetricRequest
from tests.conftest import SAMPLE_PAYLOAD, run_cli

SUMMARY = {
    "started_at": "2026-01-01T12:00:00+00:00",
    "async": {"accepted": 50, "results": 45, "failures": 2, "failed": {"AsyncFailure: <script>x</script>": 2},
              "time_to_result": {"p50_ms": 420.0, "p95_ms": 900.0, "p99_ms": 1000.0,
                                 "ci95": {"p50_ms": [400.0, 450.0]}},
              "awaited_at_stop": 3, "backlog_max": 7, "backlog": [0, 2, 5, 7, 3], "backlog_every_s": 1},
    "async_search": {"capacity_rps": 6.0, "grows_at_rps": 12.0, "stop_reason": "backlog grows at 12 req/s",
                     "steps": [{"rate_rps": 6.0, "backlog_slope_per_s": 0.0, "backlog_slope_ci95": [-0.1, 0.2],
                                "backlog": "bounded", "backlog_last": 2},
                               {"rate_rps": 12.0, "backlog_slope_per_s": 4.9, "backlog_slope_ci95": [3.7, 6.1],
                                "backlog": "grows", "backlog_last": 59}]},
}


def _div(fig, div_id: str) -> str:
    return f'<div id="{div_id}">{len(fig.data)} traces</div>'


def _missing(div_id: str, title: str, why: str) -> str:
    return f'<div id="{div_id}" class="missing">{title}: {why}</div>'


def _frames():
    seconds = pd.DataFrame({"epoch_s": [1_767_268_800 + i for i in range(120)],
                            "cw_ApproximateBacklogSize_max_count": [4.0] * 60 + [9.0] * 60,
                            "cw_ApproximateBacklogSize_avg_count": [2.0] * 60 + [6.0] * 60,
                            "cw_ApproximateAgeOfOldestRequest_max_s": [1.0] * 60 + [3.5] * 60})
    steps = pd.DataFrame({"step": [1, 2], "cw_ApproximateBacklogSize_max_count": [4.0, 9.0],
                          "cw_TimeInBacklog_avg_ms": [120.0, 800.0]})
    return seconds, steps


def test_the_section_shows_the_client_the_search_and_the_endpoints_queue():
    seconds, steps = _frames()
    view = async_view(SUMMARY, seconds, steps)
    assert view is not None
    assert list(view.client_backlog["backlog"]) == [0, 2, 5, 7, 3]
    assert len(view.endpoint) == 2  # one row per CloudWatch minute
    page = async_section(view, _div, _missing)
    assert "<h2>Asynchronous inference</h2>" in page and '<table id="async-client">' in page
    assert "420 ms (95 % 400-450 ms)" in page
    assert '<table id="async-search">' in page and "capacity at least 6 req/s, below 12 req/s" in page
    assert f'<div id="{FIG_ID}">4 traces</div>' in page  # the client's backlog, CloudWatch's avg, max, age
    assert '<table id="async-steps">' in page and "TimeInBacklog avg ms" in page and "<td>800</td>" in page
    assert "<script>" not in page  # the failure's name is text from the endpoint


def test_the_search_with_a_time_to_result_slo_shows_each_steps_percentile_and_verdict():
    seconds, steps = _frames()
    search = {"capacity_rps": 3.0, "grows_at_rps": None, "slo_breach_at_rps": 6.0, "stop_reason": "p95 above",
              "time_to_result_slo_ms": 500.0, "slo_percentile": 95.0, "verdict": "INCONCLUSIVE",
              "inconclusive_reason": "at 4.5 req/s <b>straddles</b>",
              "steps": [{"rate_rps": 3.0, "backlog": "bounded", "time_to_result_ms": 310.0,
                         "time_to_result_ci95": [300.0, 330.0], "awaited": 0, "slo": "keeps"},
                        {"rate_rps": 6.0, "backlog": "bounded", "time_to_result_ms": 900.0,
                         "time_to_result_ci95": [800.0, 1100.0], "awaited": 4, "slo": "breach"}]}
    page = async_section(async_view({**SUMMARY, "async_search": search}, seconds, steps), _div, _missing)
    assert "<th>p95 time to result ms</th>" in page and "<td>800 to 1,100</td>" in page
    assert "<td>breach</td>" in page and "<td>keeps</td>" in page and "below 6 req/s" in page
    assert "(time-to-result SLO p95 &lt;= 500 ms); INCONCLUSIVE: at 4.5 req/s &lt;b&gt;straddles" in page
    assert "time to result ms" not in async_section(async_view(SUMMARY, seconds, steps), _div, _missing)


def test_without_async_there_is_no_section_and_without_data_the_chart_says_why():
    seconds, steps = _frames()
    assert async_view({"totals": {}}, seconds, steps) is None
    assert async_section(None, _div, _missing) == ""
    bare = async_view({"async": {"accepted": 1}}, pd.DataFrame({"epoch_s": []}), pd.DataFrame())
    page = async_section(bare, _div, _missing)
    assert f'id="{FIG_ID}" class="missing"' in page and "async-search" not in page and "async-steps" not in page


def test_an_async_run_asks_cloudwatch_for_the_queue_metrics():
    def names(**kw) -> set[str]:
        return {m.name for m in select_metrics(MetricRequest("ep", 0, 60, **kw))}

    queue = {"ApproximateBacklogSize", "ApproximateAgeOfOldestRequest", "TimeInBacklog", "InvocationsProcessed"}
    assert queue <= names(async_inference=True)
    assert not queue & names()


@pytest.mark.e2e
def test_the_report_draws_the_endpoints_queue_from_cloudwatch(endpoint_factory, moto_url, tmp_path):
    import boto3

    s3 = boto3.client("s3", endpoint_url=moto_url, region_name="us-east-1", aws_access_key_id="testing",
                      aws_secret_access_key="testing")
    s3.create_bucket(Bucket="async-report")
    s3.put_object(Bucket="async-report", Key="in.json", Body=SAMPLE_PAYLOAD.read_bytes())
    config = AsyncEndpointConfig(output_path="s3://async-report/out", max_concurrent=1, s3_url=moto_url)
    ep = endpoint_factory(cloudwatch_url=moto_url, metrics_interval_s=1.0, endpoint_name="ep", service_time_ms=150,
                          async_inference=config)
    out = tmp_path / "run"
    env = {"AWS_ENDPOINT_URL_S3": moto_url, "AWS_ENDPOINT_URL_CLOUDWATCH": moto_url, "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    run = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", ep.url, "--payload", str(SAMPLE_PAYLOAD),
                  "-u", "4", "-t", "5s", "--async-input-location", "s3://async-report/in.json", "--async-result", "s3",
                  "--async-poll-ms", "40", "--out", str(out), "-q", env=env)
    assert run.returncode in (0, 1), run.stdout + run.stderr
    ep.stop()  # published every second while it ran; stopping flushes the rest
    report = run_cli("report", str(out), env=env)
    assert report.returncode in (0, 1), report.stdout + report.stderr  # 1: gaps (metrics a local run lacks)
    page = (out / "report.html").read_text()
    assert "<h2>Asynchronous inference</h2>" in page and '<table id="async-client">' in page
    assert f'<div id="{FIG_ID}"' in page and f'id="{FIG_ID}" class="missing"' not in page
    header = (out / "steps.csv").read_text().splitlines()[0]
    assert "cw_ApproximateBacklogSize_max_count" in header and "cw_TimeInBacklog_avg_ms" in header
    summary = json.loads((out / "summary.json").read_text())
    assert summary["async"]["results"] > 0


def test_time_to_result_reads_typed_and_an_older_one_without_intervals_shows_the_figures_alone():
    from sm_locust.record.model import Async
    from sm_locust.report.asyncview import TimeToResult, _client_rows

    ttr = TimeToResult.of({"p50_ms": 420.0, "p95_ms": 900.0, "ci95": {"p50_ms": [400.0, 450.0], "p95_ms": None}})
    assert (ttr.p50_ms, ttr.interval("p50_ms"), ttr.interval("p95_ms"), ttr.interval("p99_ms")) == \
        (420.0, (400.0, 450.0), None, None)
    rows = dict(_client_rows(Async.make(accepted=3, results=3, time_to_result={"p50_ms": 420.0, "p95_ms": 900.0})))
    assert rows["time to result p50"] == "420 ms" and rows["time to result p95 / p99"] == "900 ms / n/a"
