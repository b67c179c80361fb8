"""The report and compare count logical invocations and show goodput: per-second figures from
timeline.jsonl (not Locust's Aggregated row, which adds TTFT / InterChunk entries), goodput per step
and at the sustainable point, the whole run's exact totals; the price table's region warning."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from sm_locust.measure.timeline import Second
from sm_locust.record.model import SustainablePoint
from sm_locust.record.runfolder import read_run
from sm_locust.record.timeline import encode_line
from sm_locust.report import cost, merge
from sm_locust.report.compare import compare_runs
from sm_locust.report.pipeline import ReportOptions, build_report, invocation_seconds, with_goodput

GOLDEN = Path(__file__).parent.parent / "data" / "report" / "golden"


def test_per_second_counts_come_from_the_timeline():
    seconds = pd.DataFrame({"epoch_s": [100, 101, 102, 103], "requests": [30.0, 30.0, 30.0, 30.0],
                            "failures": [3.0, 3.0, 3.0, 3.0], "rps": [30.0] * 4})  # 3 entries per stream
    timeline = pd.DataFrame({"t": [101.4, 102.4], "requests": [10, 12], "failures": [1, 0]})  # RunData.timeline
    out = invocation_seconds(seconds, timeline)
    assert list(out["requests"].fillna(-1)) == [-1, 10, 12, -1]
    assert list(out["goodput_rps"].fillna(-1)) == [-1, 9, 12, -1]
    assert list(out["rps"].fillna(-1)) == [-1, 10, 12, -1]
    without = invocation_seconds(seconds, None)  # an older run: the history, goodput beside it
    assert list(without["requests"]) == [30.0] * 4 and list(without["goodput_rps"]) == [27.0] * 4


def test_sustainable_point_is_the_best_goodput_among_clean_steps():
    steps = with_goodput(pd.DataFrame({"step": [1, 2, 3], "users": [1, 2, 4], "requests": [1000, 2000, 2100],
                                       "failures": [0, 10, 21], "rps": [100.0, 200.0, 210.0],
                                       "error_rate": [0.0, 0.005, 0.01], "p50_ms": [5, 6, 9], "p95_ms": [7, 8, 15],
                                       "p99_ms": [9, 10, 20]}))
    assert list(steps["goodput_rps"]) == pytest.approx([100.0, 199.0, 207.9])
    point = merge.sustainable_point({}, steps)
    assert point.users == 4 and point.goodput_rps == pytest.approx(207.9)


def test_report_and_compare_show_goodput_and_the_exact_totals(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(GOLDEN, run)
    summary = json.loads((run / "summary.json").read_text())
    summary["totals"].update(successes=summary["totals"]["requests"] - summary["totals"]["failures"],
                             goodput_rps=12.5, backoff={"count": 7, "seconds": 3.1})
    for step in summary["steps"]:  # each step's rate known within 10 %
        step["ci95"] = {"rps": [0.9 * step["rps"], 1.1 * step["rps"]]}
    (run / "summary.json").write_text(json.dumps(summary))
    result = build_report(run, ReportOptions(cloudwatch=False, write_summary=False))
    assert "goodput_rps" in result.steps.columns
    page = (run / "report.html").read_text()
    assert "goodput 12.5 req/s" in page and "7 back-offs after connection errors" in page
    outputs, _ = compare_runs([str(run)], tmp_path / "cmp")
    row = pd.read_csv(outputs["csv"]).iloc[0]
    assert row["run_requests"] == summary["totals"]["requests"] and row["run_goodput_rps"] == 12.5
    assert not pd.isna(row["goodput_rps"])
    # the autoscaling target carries the sustainable point's interval
    low, high = row["autoscaling_target_ci95_low"], row["autoscaling_target_ci95_high"]
    assert low < row["autoscaling_target_invocations_per_instance"] < high


def test_a_run_in_another_region_than_the_price_table_gets_one_warning():
    prices = cost.load_prices()
    point = SustainablePoint.make(rps=100.0)
    _, _, notes = cost.cost_summary(point, prices=prices, instance_type="ml.c5.xlarge", region="eu-west-1")
    warnings = [n for n in notes if n.startswith("warning:")]
    assert len(warnings) == 1 and "us-east-1" in warnings[0] and "eu-west-1" in warnings[0]
    result, _, notes = cost.cost_summary(point, prices=prices, instance_type="ml.c5.xlarge", region=prices.region)
    assert not [n for n in notes if n.startswith("warning:")]
    assert "approximate us-east-1" in result["price_source"] and prices.as_of in result["price_source"]
    _, _, notes = cost.cost_summary(point, prices=prices, price_per_hour=0.2, region="eu-west-1")
    assert not [n for n in notes if n.startswith("warning:")]  # the user's own price


def test_the_timeline_is_read_with_the_run_folder(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(GOLDEN, run)
    second = Second(t=1.0, users=1, spawning=False, requests=3, failures=1, hist={20: 3})
    (run / "timeline.json").write_text(json.dumps([second.as_dict()]))  # an older run's file
    data = read_run(run)
    assert data.timeline["requests"][0] - data.timeline["failures"][0] == 2
    (run / "timeline.json").write_text("{")
    assert read_run(run).timeline is None and any("timeline" in gap for gap in read_run(run).gaps)
    (run / "timeline.jsonl").write_bytes(encode_line(second) * 2)  # today's file wins
    assert list(read_run(run).timeline["requests"]) == [3, 3]
