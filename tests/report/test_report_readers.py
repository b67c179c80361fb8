"""The run-folder reader tolerates what a killed run leaves (N/A, a cut last line, missing files),
refuses another tool's CSV with the missing columns named, and gives the report and the gates one
view of the same folder."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from sm_locust.errors import UsageError
from sm_locust.record import runfolder

GOLDEN = Path(__file__).parent.parent / "data" / "report" / "golden"
BASE = 1704110400  # 2024-01-01T12:00:00Z


@pytest.fixture
def run_dir(tmp_path):
    dst = tmp_path / "run"
    shutil.copytree(GOLDEN, dst)
    return dst


def test_history_keeps_aggregated_rows_and_reads_na(run_dir):
    gaps: list[str] = []
    h = runfolder.read_stats_history(run_dir / "locust_stats_history.csv", gaps)
    assert list(h["epoch_s"]) == list(range(BASE + 56, BASE + 66))  # cut line at :66 skipped
    assert math.isnan(h["p50_ms"].iloc[0])  # N/A
    assert h["p95_ms"].iloc[1] == 110
    assert h["total_requests"].iloc[-1] == 140
    assert gaps == ["Locust history: the last line of locust_stats_history.csv was cut off mid-write and was skipped"]


def test_complete_last_line_without_newline_is_kept(tmp_path):
    p = tmp_path / "h.csv"
    text = (GOLDEN / "locust_stats_history.csv").read_text()
    p.write_text(text.rsplit("\n", 1)[0].rstrip("\r"))  # drop the cut line and the final newline
    gaps: list[str] = []
    h = runfolder.read_stats_history(p, gaps)
    assert h["epoch_s"].iloc[-1] == BASE + 65 and gaps == []


def test_a_history_saved_with_a_byte_order_mark_is_read(tmp_path):
    """Was: "missing column(s) 'Timestamp' (found '\\ufeffTimestamp', ...)" for a CSV saved again from Excel."""
    p = tmp_path / "locust_stats_history.csv"
    p.write_text((GOLDEN / "locust_stats_history.csv").read_text(), encoding="utf-8-sig")
    h = runfolder.read_stats_history(p, [])
    assert list(h["epoch_s"]) == list(range(BASE + 56, BASE + 66))


def test_a_fifo_or_json_nested_too_deeply_is_a_gap_or_one_line(tmp_path):
    import os

    os.mkfifo(tmp_path / "locust_failures.csv")  # was: the read blocked for ever
    gaps: list[str] = []
    assert runfolder.read_failures(tmp_path / "locust_failures.csv", gaps) is None
    assert gaps == ["Locust failures: locust_failures.csv is not a regular file"]
    (tmp_path / "summary.json").write_text("[" * 100_000 + "]" * 100_000)  # was: a RecursionError traceback
    with pytest.raises(UsageError, match="summary.json is not readable JSON .*nested too deeply"):
        runfolder.read_summary(tmp_path)


def test_over_long_line_is_skipped_and_named(tmp_path):
    p = tmp_path / "locust_failures.csv"
    p.write_text("Method,Name,Error,Occurrences\nPOST,a,E1,2\nPOST,a,E2,3,extra,fields\nPOST,a,E3,4\n")
    gaps: list[str] = []
    f = runfolder.read_failures(p, gaps)
    assert list(f["error"]) == ["E1", "E3"] and list(f["occurrences"]) == [2, 4]
    assert "skipped 1 malformed line" in gaps[0]


def test_other_tools_csv_names_missing_columns(tmp_path):
    p = tmp_path / "locust_stats_history.csv"
    p.write_text("time,latency,throughput\n1,2,3\n")
    with pytest.raises(UsageError) as err:
        runfolder.read_stats_history(p, [])
    msg = str(err.value)
    assert "not a Locust CSV" in msg and "'Timestamp'" in msg and "'Total Request Count'" in msg


def test_missing_files_become_gaps(run_dir):
    (run_dir / "locust_failures.csv").unlink()
    (run_dir / "options.json").unlink()
    data = runfolder.read_run(run_dir)
    assert data.failures is None and data.options == {}
    assert "Locust failures: locust_failures.csv is missing" in data.gaps
    assert "options: options.json is missing" in data.gaps
    assert data.summary["endpoint"] == "golden-ep"


def test_bad_summary_json_is_a_gap(run_dir):
    (run_dir / "summary.json").write_text("{not json")
    data = runfolder.read_run(run_dir)
    assert data.summary == {} and any("summary.json is not valid JSON" in g for g in data.gaps)


def test_not_a_run_folder(tmp_path):
    with pytest.raises(UsageError, match="not a run folder"):
        runfolder.read_run(tmp_path)
    with pytest.raises(UsageError, match="not a folder"):
        runfolder.read_run(tmp_path / "nope")


def test_stats_and_failures(run_dir):
    gaps: list[str] = []
    s = runfolder.read_stats(run_dir / "locust_stats.csv", gaps)
    agg = s[s["name"] == "Aggregated"].iloc[0]
    assert agg["requests"] == 140 and agg["p99_ms"] == 150 and agg["avg_ms"] == 122
    f = runfolder.read_failures(run_dir / "locust_failures.csv", gaps)
    assert dict(zip(f["error"], f["occurrences"], strict=True)) == {"ModelError(424)": 1, "ThrottlingException": 1}
    assert gaps == []


def test_without_summary_the_report_reads_the_csvs_and_the_gates_refuse(run_dir):
    (run_dir / "summary.json").unlink()
    data = runfolder.read_run(run_dir)
    assert data.summary == {} and "summary: summary.json is missing" in data.gaps
    assert data.history is not None and len(data.history) == 10
    with pytest.raises(UsageError, match="no summary.json"):
        runfolder.load_run(run_dir)


def test_report_and_gates_read_one_view_of_the_folder(run_dir):
    report, gate = runfolder.read_run(run_dir), runfolder.load_run(run_dir)
    assert report.by_name == gate.by_name and "Aggregated" not in gate.by_name
    assert report.totals == gate.totals and gate.totals.requests == report.summary["totals"]["requests"]
    assert gate.source == str(run_dir) and gate.scope(None) == gate.totals
