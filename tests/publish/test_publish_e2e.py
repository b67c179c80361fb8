"""Live metrics end to end, against the local endpoint and a moto CloudWatch server (tests/fakes.py).

The issue's "35-s run with --publish-period 10" is emulated with a 10-12 s run and 5-s periods:
the assertions are the same relations (what CloudWatch holds over the run against summary.json and
Locust's final stats), over 3+ periods instead of 4, so each period boundary, the partial last
period and the remainder sent at quit are all exercised.

- one process (`sm-locust run`): SampleCount of EndToEndLatency = totals.requests (+ at most those
  in flight), Sum / SampleCount = the mean latency within 2 %, Maximum = the max, Failures per
  error = summary.json's errors by code; `--dashboard` leaves a dashboard naming AWS/SageMaker
  ModelLatency and the client's EndToEndLatency;
- master + 2 workers (processes, as tests/record/test_workers.py starts them): the same relations
  (nothing counted twice: workers publish nothing), and a scrape of /metrics after the stop equals
  summary.json's totals, histogram _count = requests;
- CloudWatch unreachable: one line before the test, exit 2, no run folder.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import locust  # noqa: F401  (gevent patching before boto3)

import boto3
import pytest

from sm_locust.util.ports import free_port
from tests.conftest import ROOT, SAMPLE_PAYLOAD, assert_one_line_error, run_cli
from tests.fakes import stop_processes, wait_exit

pytestmark = pytest.mark.e2e
LOCUSTFILE = str(ROOT / "locustfiles" / "sagemaker.py")


def cloudwatch(url: str):
    return boto3.client("cloudwatch", endpoint_url=url, region_name="us-east-1")


def statistics(cw, endpoint: str, metric: str, stats: list[str], extra_dims=()) -> list[dict]:
    now = datetime.now(UTC)
    answer = cw.get_metric_statistics(Namespace="sm-locust", MetricName=metric,
                                      Dimensions=[{"Name": "EndpointName", "Value": endpoint}, *extra_dims],
                                      StartTime=now - timedelta(minutes=15), EndTime=now + timedelta(minutes=2),
                                      Period=60, Statistics=stats)
    return answer["Datapoints"]


def published(cw, endpoint: str) -> dict:
    """What CloudWatch holds for the run, summed over its data points."""
    latency = statistics(cw, endpoint, "EndToEndLatency", ["SampleCount", "Sum", "Maximum"])
    errors = {}
    for metric in cw.list_metrics(Namespace="sm-locust", MetricName="Failures")["Metrics"]:
        dims = {d["Name"]: d["Value"] for d in metric["Dimensions"]}
        if dims.get("EndpointName") == endpoint and "Error" in dims:
            points = statistics(cw, endpoint, "Failures", ["Sum"], [{"Name": "Error", "Value": dims["Error"]}])
            errors[dims["Error"]] = round(sum(p["Sum"] for p in points))
    # moto matches every metric whose dimensions INCLUDE the ones asked for (CloudWatch: the exact set), so
    # Failures{EndpointName} also sums the per-error ones here (docs/facts.md)
    all_failures = round(sum(p["Sum"] for p in statistics(cw, endpoint, "Failures", ["Sum"])))
    return {"count": round(sum(p["SampleCount"] for p in latency)), "sum": sum(p["Sum"] for p in latency),
            "max": max(p["Maximum"] for p in latency),
            "requests": round(sum(p["Sum"] for p in statistics(cw, endpoint, "Requests", ["Sum"]))),
            "failures": all_failures - sum(errors.values()), "errors": errors}


def aggregated(run_dir: Path) -> dict:
    """Locust's final figures (rewritten at quit from the same stats as summary.json)."""
    with open(run_dir / "locust_stats.csv", newline="") as handle:
        row = next(r for r in csv.DictReader(handle) if r["Name"] == "Aggregated")
    return {"mean": float(row["Average Response Time"]), "max": float(row["Max Response Time"])}


def assert_published_equals_summary(cw, endpoint: str, run_dir: Path) -> dict:
    summary = json.loads((run_dir / "summary.json").read_text())
    totals = summary["totals"]
    got = published(cw, endpoint)
    exact = aggregated(run_dir)
    assert totals["requests"] > 100 and totals["failures"] > 0
    assert totals["requests"] <= got["count"] <= totals["requests"] + totals["in_flight_at_stop"]
    assert got["requests"] == got["count"] and got["failures"] == totals["failures"]
    assert got["sum"] / got["count"] == pytest.approx(exact["mean"], rel=0.02)
    assert got["max"] == pytest.approx(exact["max"], rel=1e-9)
    assert got["errors"] == totals["errors"]
    report = summary["publish"]["cloudwatch"]
    assert report["dropped"] == 0 and report["periods"] >= 3 and report["periods_sent"] == report["periods"]
    assert report["published"]["latency_count"] == got["count"]
    return summary


@pytest.fixture
def faulty_endpoint(endpoint_factory):
    return endpoint_factory(max_concurrency=8, service_time_ms=5, jitter_ms=20, throttle_ratio=0.04,
                            model_error_ratio=0.04, seed=7)


def test_a_run_publishes_what_summary_json_counts(faulty_endpoint, moto_url, tmp_path):
    run_dir = tmp_path / "run"
    result = run_cli("run", "--endpoint-name", "pub-local", "--endpoint-url", faulty_endpoint.url, "--payload",
                     str(SAMPLE_PAYLOAD), "-u", "4", "-t", "12s", "--publish", "cloudwatch", "--publish-period", "5",
                     "--dashboard", "--out", str(run_dir), "-q", env={"AWS_ENDPOINT_URL_CLOUDWATCH": moto_url})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    cw = cloudwatch(moto_url)
    assert_published_equals_summary(cw, "pub-local", run_dir)
    assert "published to CloudWatch (sm-locust):" in result.stdout and "nothing dropped" in result.stdout
    closing = [line for line in result.stdout.splitlines() if "requests," in line][-1]
    assert "CloudWatch" in closing  # the verdict line says what was published
    report = run_cli("report", str(run_dir), "--cloudwatch", "--instance-type", "ml.c5.xlarge",
                     env={"AWS_ENDPOINT_URL_CLOUDWATCH": moto_url})
    assert "what was published equals summary.json" in report.stdout, report.stdout[-2000:] + report.stderr[-2000:]
    body = cw.get_dashboard(DashboardName="sm-locust-pub-local")["DashboardBody"]
    assert "AWS/SageMaker" in body and "ModelLatency" in body and "EndToEndLatency" in body and "pub-local" in body


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_master_and_two_workers_publish_each_request_once(faulty_endpoint, moto_url, tmp_path):
    run_dir = tmp_path / "run"
    master_port, web_port, metrics_port = free_port(), free_port(), free_port()
    env = {**os.environ, "AWS_ENDPOINT_URL_CLOUDWATCH": moto_url, "PYTHONUNBUFFERED": "1"}
    master_cmd = [sys.executable, "-m", "locust", "-f", LOCUSTFILE, "--master", "--master-bind-host", "127.0.0.1",
                  "--master-bind-port", str(master_port), "--web-port", str(web_port), "--autostart", "--autoquit",
                  "8", "--expect-workers", "2", "--expect-workers-max-wait", "60", "-u", "4", "-r", "4", "-t", "10s",
                  "--sm-out", str(run_dir), "--csv", str(run_dir / "locust"), "--endpoint-name", "pub-dist",
                  "--endpoint-url", faulty_endpoint.url, "--payload", str(SAMPLE_PAYLOAD), "--publish",
                  f"cloudwatch,prometheus:127.0.0.1:{metrics_port}", "--publish-period", "5",
                  "--exit-code-on-error", "0"]
    worker_cmd = [sys.executable, "-m", "locust", "-f", LOCUSTFILE, "--worker", "--master-host", "127.0.0.1",
                  "--master-port", str(master_port)]
    run_dir.mkdir()
    logs = {name: open(tmp_path / f"{name}.log", "wb") for name in ("master", "worker1", "worker2")}
    processes = {"master": subprocess.Popen(master_cmd, env=env, stdout=logs["master"], stderr=subprocess.STDOUT,
                                            start_new_session=True)}
    for name in ("worker1", "worker2"):
        processes[name] = subprocess.Popen(worker_cmd, env=env, stdout=logs[name], stderr=subprocess.STDOUT,
                                           start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while True:  # summary.json says complete once the test has stopped; autoquit keeps /metrics up 8 s more
            summary_path = run_dir / "summary.json"
            if summary_path.exists() and json.loads(summary_path.read_text() or "{}").get("complete"):
                break
            assert processes["master"].poll() is None and time.monotonic() < deadline, \
                (tmp_path / "master.log").read_text()[-3000:]
            time.sleep(0.3)
        time.sleep(4.0)  # the workers' last reports (they report every 3 s and once more when stopped)
        at_end = scrape(metrics_port)
        wait_exit(processes["master"], 60)
    finally:
        stop_processes(processes.values())
        for handle in logs.values():
            handle.close()
    master_log = (tmp_path / "master.log").read_text()
    assert processes["master"].returncode == 0, master_log[-3000:]
    summary = assert_published_equals_summary(cloudwatch(moto_url), "pub-dist", run_dir)
    assert summary["workers"]["connected"] == 2
    assert "published to CloudWatch" in master_log
    for name in ("worker1", "worker2"):
        assert "published to CloudWatch" not in (tmp_path / f"{name}.log").read_text()
    totals = summary["totals"]
    requests = sum(v for (n, _), v in at_end.items() if n == "sm_locust_requests_total")
    counted = sum(v for (n, _), v in at_end.items() if n == "sm_locust_request_latency_seconds_count")
    by_error: dict[str, float] = {}
    for (n, labels), v in at_end.items():
        if n == "sm_locust_failures_total":
            code = dict(labels)["error"]
            by_error[code] = by_error.get(code, 0) + v
    assert requests == counted == totals["requests"]
    assert by_error == totals["errors"] and sum(by_error.values()) == totals["failures"]
    assert all(dict(labels)["endpoint"] == "pub-dist" for (n, labels) in at_end if n == "sm_locust_requests_total")


def test_cloudwatch_out_of_reach_is_one_line_before_the_test(endpoint, tmp_path):
    run_dir = tmp_path / "run"
    result = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", endpoint.url, "--payload", str(SAMPLE_PAYLOAD),
                     "-t", "5s", "--publish", "cloudwatch", "--out", str(run_dir),
                     env={"AWS_ENDPOINT_URL_CLOUDWATCH": f"http://127.0.0.1:{free_port()}"})
    assert_one_line_error(result, 2, "--publish cloudwatch", "cannot reach CloudWatch at http://127.0.0.1:")
    assert not run_dir.exists()
    assert endpoint.stats()["requests"] == 0
