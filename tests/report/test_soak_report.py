"""Week-long reports: the per-hour rows (pure aggregation of synthetic seconds, with and without the
recorder's own hours), the min/max envelope of long charts, the fast readers and writer agreeing
with the pandas-only path (pyarrow hidden), and a short synthetic run (the bench's, under 10 h,
which used to crash) reported end to end with its "Per hour" section."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.report import synthesize
from sm_locust.record import runfolder
from sm_locust.record.runfolder import read_run
from sm_locust.record.summary import iso
from sm_locust.report import render, tables
from sm_locust.report.hourly import hourly_rows
from sm_locust.report.merge import iso_seconds
from sm_locust.report.pipeline import ReportOptions, build_report
from sm_locust.report.tables import write_timeseries

START = 1_704_067_200  # 2024-01-01T00:00:00Z


def frame(hours: int = 3) -> pd.DataFrame:
    """Per-second rows (the merged frame) of a run whose load, latency and endpoint CPU climb each hour."""
    epochs = np.arange(START + 1, START + hours * 3600 + 1)
    hour = (epochs - 1 - START) // 3600
    minute = (epochs - START) // 60
    return pd.DataFrame({
        "epoch_s": epochs, "users": 10 * (hour + 1), "requests": 10.0 * (hour + 1),
        "failures": (epochs % 100 == 0) * 1.0,
        "p50_ms": 20.0 + 5 * hour, "p95_ms": 40.0 + 10 * hour, "p99_ms": 60.0 + 20 * hour,
        "cw_CPUUtilization_avg_pct": 50.0 + 10 * hour + (minute % 2),
        "cw_CPUUtilization_max_pct": 70.0 + 10 * hour + (minute % 3),
        "cw_MemoryUtilization_avg_pct": 30.0 + hour,
    })


def test_hourly_rows_from_the_seconds_alone():
    rows = hourly_rows(frame(), {"started_at": iso(START)})
    assert list(rows["hour"]) == [1, 2, 3]
    assert list(rows["start"]) == [iso(START + k * 3600, "seconds") for k in range(3)]
    assert list(rows["requests"]) == [36_000.0, 72_000.0, 108_000.0]
    assert list(rows["failures"]) == [36.0, 36.0, 36.0]
    assert list(rows["rps"]) == pytest.approx([10.0, 20.0, 30.0])
    assert list(rows["goodput_rps"]) == pytest.approx([9.99, 19.99, 29.99])
    assert list(rows["error_rate"]) == pytest.approx([0.001, 0.0005, 1 / 3000])
    assert list(rows["users"]) == [10, 20, 30]
    assert list(rows["p95_ms"]) == [40.0, 50.0, 60.0] and list(rows["p99_ms"]) == [60.0, 80.0, 100.0]
    assert list(rows["cw_CPUUtilization_avg_pct"]) == pytest.approx([50.5, 60.5, 70.5])  # time-weighted mean
    assert list(rows["cw_CPUUtilization_max_pct"]) == [72.0, 82.0, 92.0]  # the busiest minute
    assert list(rows["cw_MemoryUtilization_avg_pct"]) == pytest.approx([30.0, 31.0, 32.0])
    assert "cw_GPUUtilization_avg_pct" not in rows.columns  # only the endpoint columns the run has


def test_hourly_rows_take_the_recorders_exact_hours_and_a_partial_last_hour():
    seconds = frame()[lambda f: f["epoch_s"] <= START + 2 * 3600 + 1800]  # stopped half-way through hour 3
    hours = [{"hour": 1, "start": iso(START), "end": iso(START + 3600), "duration_s": 3600.0, "users": 10,
              "requests": 36_001, "failures": 3, "rps": 10.0, "goodput_rps": 9.999, "error_rate": 3 / 36_001,
              "p50_ms": 21.0, "p95_ms": 44.0, "p99_ms": 71.0, "client_cpu_pct": 31.0,
              "errors": {"ModelError": 2, "ThrottlingException": 1}}]
    rows = hourly_rows(seconds, {"started_at": iso(START), "hours": hours})
    first = rows.iloc[0]
    assert (first["requests"], first["p99_ms"], first["client_cpu_pct"]) == (36_001, 71.0, 31.0)
    assert first["errors"] == "ModelError 2, ThrottlingException 1"
    assert first["cw_CPUUtilization_avg_pct"] == pytest.approx(50.5)  # the endpoint's side still from the seconds
    last = rows.iloc[-1]
    assert (last["hour"], last["duration_s"], last["requests"]) == (3, 1800.0, 54_000.0)
    assert last["end"] == iso(START + 2 * 3600 + 1800, "seconds")


def test_long_time_charts_average_buckets_and_keep_their_min_and_max():
    n = 604_800
    seconds = pd.DataFrame({"epoch_s": np.arange(n) + START, "rps": np.where(np.arange(n) % 1000 == 7, 500.0, 100.0)})
    d = render._downsample(seconds, ["rps"], envelope=("rps",))
    k = d.attrs["bucket_s"]
    assert len(d) <= render.MAX_POINTS and k == 202
    assert d["rps_max"].max() == 500.0 and d["rps_min"].min() == 100.0  # a one-second spike stays visible
    assert d["rps"].iloc[0] == pytest.approx((100.0 * (k - 1) + 500.0) / k)
    short = render._downsample(seconds.head(100), ["rps"], envelope=("rps",))
    assert len(short) == 100 and "rps_max" not in short.columns


def test_iso_seconds_match_iso():
    epochs = [0, 59, 60, 86_399, START, START + 604_799, 4_102_444_799]
    assert list(iso_seconds(epochs)) == [iso(e, "seconds") for e in epochs]
    assert list(iso_seconds(np.arange(START, START + 3))) == [iso(START + i, "seconds") for i in range(3)]


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("bench") / "run"
    run.mkdir()
    synthesize(run, 3)  # under 10 hours: used to crash on steps[9]
    return run


def _without_pyarrow(monkeypatch):
    """As if pyarrow were not installed (pandas itself may use it, so it is not hidden from pandas)."""
    def missing(*_args, **_kw):
        raise ImportError("No module named 'pyarrow'")

    monkeypatch.setattr(runfolder, "_history_arrow", missing)
    monkeypatch.setattr(runfolder, "_timeline_arrow", missing)
    monkeypatch.setattr(tables, "_arrow", lambda: None)


def test_the_fast_readers_and_writer_agree_with_the_pandas_path(short_run, tmp_path, monkeypatch):
    pytest.importorskip("pyarrow")
    fast = read_run(short_run)
    seconds = pd.DataFrame({"epoch_s": np.arange(START, START + 5), "rps": [1.0, 2.5, np.nan, 1234.56789, 0.0],
                            "cw_x_avg_ms": [15.338409129, np.nan, 3.0, 0.1, 2e-5], "users": np.arange(5)})
    write_timeseries(seconds, tmp_path / "fast.csv", time=iso_seconds)
    with monkeypatch.context() as patch:
        _without_pyarrow(patch)
        slow = read_run(short_run)
        write_timeseries(seconds, tmp_path / "slow.csv", time=iso_seconds)
    pd.testing.assert_frame_equal(fast.history, slow.history, check_dtype=False)
    pd.testing.assert_frame_equal(fast.timeline, slow.timeline, check_dtype=False)
    assert fast.gaps == slow.gaps == []
    written = pd.read_csv(tmp_path / "fast.csv"), pd.read_csv(tmp_path / "slow.csv")
    pd.testing.assert_frame_equal(*written, check_exact=False, rtol=1e-5)
    assert (tmp_path / "fast.csv").read_text().splitlines()[:3] == [
        "time,epoch_s,rps,cw_x_avg_ms,users", f"{iso(START, 'seconds')},{START},1,15.3384,0",
        f"{iso(START + 1, 'seconds')},{START + 1},2.5,,1"]


def test_a_cut_history_line_and_a_cut_timeline_line_are_gaps_on_both_paths(short_run, tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    for path in short_run.iterdir():
        (run / path.name).write_bytes(path.read_bytes())
    with open(run / "locust_stats_history.csv", "ab") as fh:
        fh.write(b"1704078001,3,POST,invoke,1")
    with open(run / "timeline.jsonl", "ab") as fh:
        fh.write(b'{"t":1704078001.0,"users":3,"spa')
    fast = read_run(run)
    with monkeypatch.context() as patch:
        _without_pyarrow(patch)
        slow = read_run(run)
    assert fast.gaps == slow.gaps and len(fast.gaps) == 2
    assert len(fast.history) == len(slow.history) == 3 * 3600 and len(fast.timeline) == 3 * 3600


def test_a_short_run_is_reported_with_its_hours(short_run, tmp_path):
    result = build_report(short_run,
                          ReportOptions(cloudwatch=False, instance_type="ml.c5.xlarge", out_dir=str(tmp_path)))
    hourly = pd.read_csv(result.outputs["hourly"])
    assert list(hourly["hour"]) == [1, 2, 3] and list(hourly["users"]) == [1, 2, 3]
    page = result.outputs["html"].read_text()
    assert '<h2>Per hour</h2>' in page and 'id="fig-hourly"' in page and page.count("<tr>",
                                                                                    page.index('id="hours"')) >= 4
    merged = pd.read_csv(result.outputs["timeseries"])
    assert len(merged) == 3 * 3600 and merged["time"].iloc[0] == iso(START + 1, "seconds")
