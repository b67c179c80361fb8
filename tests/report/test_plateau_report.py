"""The report's headline shows the plateau search's two answers: the capacity (what the endpoint
sustains) and the knee (where it starts), from summary.json's plateau; older runs keep one row."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd

from sm_locust.report import merge
from sm_locust.report.pipeline import ReportOptions, build_report

GOLDEN = Path(__file__).parent.parent / "data" / "report" / "golden"
STEPS = pd.DataFrame({"step": [1, 2, 3], "users": [1, 2, 4], "rps": [100.0, 180.0, 199.0], "error_rate": [0.0] * 3,
                      "p50_ms": [5, 6, 9], "p95_ms": [7, 8, 15], "p99_ms": [9, 10, 20]})


def test_sustainable_point_carries_the_capacity():
    plateau = {"users": 2, "rps": 180.0, "capacity_rps": 199.0, "p50_ms": 6, "p95_ms": 8, "p99_ms": 10}
    point = merge.sustainable_point({"plateau": plateau}, STEPS)
    assert point.capacity_rps == 199.0 and point.rps == 180.0 and point.users == 2


def test_the_point_quotes_its_steps_own_figures_by_index():
    plateau = {"users": 2, "rps": 180.0, "capacity_rps": 199.0, "capacity_ci95": [195.0, 203.0], "knee_step": 1,
               "capacity_step": 2, "p95_ms": 8}
    steps = STEPS.assign(rps_ci95_low=[98.0, 176.0, 196.0], rps_ci95_high=[102.0, 184.0, 202.0])
    point = merge.sustainable_point({"plateau": plateau}, steps)
    assert (point.step, point.users, point.rps, point.rps_ci95) == (2, 2, 180.0, (176.0, 184.0))
    assert (point.capacity_step, point.capacity_users, point.capacity_p95_ms) == (3, 4, 15)
    words = merge.describe_point(point)
    assert words["capacity"] == "199.0 req/s (±4.0) (step 3: 4 users, p95 15 ms)"
    assert words["knee"] == "step 2: 180.0 req/s (±4.0) at 2 users" and "verdict" not in words
    inconclusive = merge.sustainable_point({"plateau": plateau, "verdict": {"status": "inconclusive",
                                                                            "reason": "client CPU 95 %"}}, steps)
    assert merge.describe_point(inconclusive)["verdict"] == "INCONCLUSIVE: client CPU 95 %"


def test_report_headline_shows_capacity_and_knee(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(GOLDEN, run)
    summary = json.loads((run / "summary.json").read_text())
    knee = summary["steps"][0]
    users = knee["users"]
    summary["plateau"] = {"users": users, "rps": knee["rps"], "capacity_rps": 199.5, "p50_ms": 6.0, "p95_ms": 8.0,
                          "p99_ms": 10.0, "reason": "throughput gain < 5 % over 2 steps", "stable": True}
    (run / "summary.json").write_text(json.dumps(summary))
    build_report(run, ReportOptions(cloudwatch=False, write_summary=False))
    page = (run / "report.html").read_text()
    assert "Capacity (best stable goodput at or beyond the knee)" in page and "199.5 req/s" in page
    # the knee row quotes the knee step's own record (an older summary.json: the step at the plateau's users)
    assert "Knee (least load within 5 % of the plateau)" in page and f"step 1: {knee['rps']:.1f} req/s" in page
    assert f"at {users} users" in page
    del summary["plateau"]["capacity_rps"]  # a run recorded before capacity_rps existed
    (run / "summary.json").write_text(json.dumps(summary))
    build_report(run, ReportOptions(cloudwatch=False, write_summary=False))
    page = (run / "report.html").read_text()
    assert "Max sustainable throughput" in page and "Capacity (" not in page


def test_an_inconclusive_run_says_so_first_in_the_report(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(GOLDEN, run)
    summary = json.loads((run / "summary.json").read_text())
    reason = "step 1 (1 users) was client-bound: client CPU 95 % >= 90 %"
    summary["verdict"] = {"status": "inconclusive", "reason": reason}
    (run / "summary.json").write_text(json.dumps(summary))
    result = build_report(run, ReportOptions(cloudwatch=False, write_summary=False))
    page = (run / "report.html").read_text()
    summary_table = page[page.index('<table id="summary">'):]
    first_row = summary_table[:summary_table.index("</tr>")]
    assert "Verdict" in first_row and "INCONCLUSIVE: step 1 (1 users) was client-bound" in first_row
    assert result.point.inconclusive is True


def test_the_point_writes_its_keys_in_the_order_built_and_its_intervals_as_lists():
    plateau = {"users": 2, "rps": 180.0, "capacity_rps": 199.0, "capacity_ci95": [195.0, 203.0], "knee_step": 1,
               "capacity_step": 2, "p95_ms": 8}
    steps = STEPS.assign(rps_ci95_low=[98.0, 176.0, 196.0], rps_ci95_high=[102.0, 184.0, 202.0])
    written = merge.sustainable_point({"plateau": plateau}, steps).to_json()
    assert list(written)[:12] == ["users", "rps", "goodput_rps", "p50_ms", "p95_ms", "p99_ms", "source", "stable",
                                  "capacity_rps", "capacity_ci95", "inconclusive", "inconclusive_reason"]
    assert list(written)[12:] == ["step", "rps_ci95", "goodput_rps_ci95", "p50_ms_ci95", "p95_ms_ci95", "p99_ms_ci95",
                                  "capacity_step", "capacity_users", "capacity_p95_ms"]
    assert written["capacity_ci95"] == [195.0, 203.0] and written["rps_ci95"] == [176.0, 184.0]
    best = merge.sustainable_point({}, steps).to_json()  # no plateau: the best step, its verdict last
    assert list(best)[6:9] == ["source", "stable", "step"]
    assert list(best)[-2:] == ["inconclusive", "inconclusive_reason"]
    assert json.loads(json.dumps(best)) == best
