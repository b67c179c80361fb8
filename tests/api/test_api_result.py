"""RunResult, `sm_locust.load` (local and s3://) and `sm_locust.compare`, on real run folders: one short
plateau search and one constant-users run against the local endpoint, shared by the module."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import boto3
import pandas as pd
import plotly.graph_objects as go
import pytest
from moto import mock_aws

import sm_locust
from sm_locust.aws.s3 import S3Location, upload_folder
from sm_locust.errors import UsageError
from tests.conftest import SAMPLE_PAYLOAD, run_cli

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "report" / "golden"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(plateau run, constant run of 2 s): 2-slot endpoint at 20 ms (~100 req/s), steps of 3 s."""
    base = tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AWS_EC2_METADATA_DISABLED", "true")
        env.setenv("AWS_CONFIG_FILE", str(base / "aws_config"))
        env.setenv("AWS_SHARED_CREDENTIALS_FILE", str(base / "aws_credentials"))
        with sm_locust.LocalEndpoint(max_concurrency=2, service_time_ms=20) as ep:
            plateau = sm_locust.run("ep", endpoint_url=ep.url, payload=str(SAMPLE_PAYLOAD), shape="plateau",
                                    step_seconds=3, min_step_seconds=2, max_users=8, out=base / "plateau",
                                    progress=False)
            constant = sm_locust.run("ep", endpoint_url=ep.url, payload=str(SAMPLE_PAYLOAD), users=1, run_time="2s",
                                     out=base / "constant", progress=False)
    return plateau, constant


@pytest.mark.e2e
def test_the_plateau_result(runs):
    result = runs[0]
    plateau = result.plateau
    assert isinstance(plateau, pd.Series) and plateau["capacity_rps"] > 0 and plateau["users"] >= 1
    assert plateau["text"] in result.verdict and result.verdict.splitlines()[1] == plateau["text"]
    steps = result.steps
    assert len(steps) == plateau["steps"] >= 3 and steps["users"].iloc[0] == 1
    assert {"users", "start", "end", "rps", "p95_ms", "goodput_rps", "stable"} <= set(steps.columns)
    assert (steps["end"] > steps["start"]).all()


@pytest.mark.e2e
def test_load_is_the_same_result(runs):
    result = runs[0]
    loaded = sm_locust.load(result.run_dir)
    assert loaded.summary == result.summary and loaded.verdict == result.verdict
    pd.testing.assert_frame_equal(loaded.steps, result.steps)
    pd.testing.assert_frame_equal(loaded.timeline, result.timeline)
    assert repr(loaded) == f"RunResult({str(result.run_dir)!r}: {result.verdict.splitlines()[0]})"


def test_load_refuses_a_folder_that_is_not_a_run(tmp_path):
    with pytest.raises(UsageError, match=r"run folder '.*' is not a run: it has no summary.json"):
        sm_locust.load(tmp_path)
    with pytest.raises(UsageError, match=r"run folder '.*missing' is not a directory"):
        sm_locust.load(tmp_path / "missing")


@pytest.mark.e2e
def test_load_from_s3(runs, tmp_path):
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="results")
        upload_folder(runs[1].run_dir, S3Location("results", "team/constant"), s3)
        loaded = sm_locust.load("s3://results/team/constant", out=tmp_path / "here", s3=s3)
    assert loaded.run_dir == tmp_path / "here" and loaded.summary == runs[1].summary
    assert len(loaded.timeline) == len(runs[1].timeline)


@pytest.mark.e2e
def test_figures_are_the_reports_charts(runs):
    figures = runs[0].figures(cloudwatch=False)
    assert {"fig-throughput", "fig-throughput-time", "fig-latency-users", "fig-latency-time"} <= set(figures)
    throughput = figures["fig-throughput"]
    assert isinstance(throughput, go.Figure) and throughput.layout.title.text.startswith("Throughput vs users")
    assert list(throughput.data[0].x) == sorted(runs[0].steps["users"].tolist())  # joined by load
    assert not (runs[0].run_dir / "report.html").exists()  # drawing writes nothing


@pytest.mark.e2e
def test_the_inline_view_shows_the_verdict_and_the_charts(runs):
    page = runs[0]._repr_html_()
    first = runs[0].verdict.splitlines()[0]
    assert first in page and "Throughput vs users" in page and "Client latency vs users" in page
    assert page.count("Plotly.newPlot") == 2 and page.count("cdn.plot.ly") == 1  # plotly.js once, not per chart


@pytest.mark.e2e
def test_report_writes_the_page_and_returns_its_path(runs, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(runs[1].run_dir, copy)
    result = sm_locust.load(copy)
    path = result.report(cloudwatch=False, instance_type="ml.c5.xlarge")
    assert path == copy / "report.html" and 'id="fig-throughput"' in path.read_text()
    assert result.summary["cost"]["instance_type"] == "ml.c5.xlarge"  # the re-read summary has the report's keys
    assert json.loads((copy / "summary.json").read_text())["report"]["outputs"]["html"] == str(path)
    with pytest.raises(UsageError, match="unknown report option instance=; choose from"):
        result.report(instance="ml.c5.xlarge")
    with pytest.raises(UsageError, match=r"--period 30 must be a multiple of 60"):
        result.report(period=30)


def test_the_typed_record_follows_the_summary_the_report_added_to(tmp_path):
    copy = tmp_path / "golden"
    shutil.copytree(GOLDEN, copy)
    result = sm_locust.load(copy)
    assert result.record.cost is None
    result.report(cloudwatch=False, instance_type="ml.c5.xlarge")
    assert result.record.cost is not None and result.record.cost["instance_type"] == "ml.c5.xlarge"
    assert result.record.to_json() == result.summary


@pytest.mark.e2e
def test_compare_is_the_clis_table(runs, tmp_path):
    table = sm_locust.compare([runs[0], str(runs[1].run_dir)])
    assert table["run"].tolist() == ["plateau", "constant"] and table.attrs["gaps"] == []
    cli = run_cli("compare", str(runs[0].run_dir), str(runs[1].run_dir), "--out", str(tmp_path / "cli"))
    assert cli.returncode == 0, cli.stderr
    written = sm_locust.compare([runs[0], runs[1]], out=tmp_path / "api")
    assert (tmp_path / "api" / "compare.html").is_file() and len(written) == 2
    assert (tmp_path / "api" / "compare.csv").read_text() == (tmp_path / "cli" / "compare.csv").read_text()
    pd.testing.assert_frame_equal(written, table)
    with pytest.raises(UsageError, match=r"--safety-factor must be at most 1, got 2.0"):
        sm_locust.compare([runs[0]], safety_factor=2.0)
    with pytest.raises(UsageError, match="compare\\(\\) needs at least one run"):
        sm_locust.compare([])
