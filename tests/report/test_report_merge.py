"""Golden small CSVs -> exact merged values: per second, per step, the latency decomposition."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from sm_locust.record.runfolder import read_run
from sm_locust.report import merge
from sm_locust.report.cloudwatch import build_queries, select_metrics, to_frame
from sm_locust.report.metrics import METRICS_BY_NAME, column_name, per_unit_column
from sm_locust.report.sources import MetricRequest

GOLDEN = Path(__file__).parent.parent / "data" / "report" / "golden"
BASE = 1704110400  # 2024-01-01T12:00:00Z
M0, M1 = BASE, BASE + 60  # the two minutes the run touches


def cw_points() -> dict[str, dict[int, float]]:
    """CloudWatch answers in CloudWatch units (µs for latencies), one value per minute."""
    return {
        ("ModelLatency", "Average"): {M0: 80_000, M1: 100_000},
        ("ModelLatency", "Maximum"): {M0: 90_000, M1: 100_000},
        ("OverheadLatency", "Average"): {M0: 5_000, M1: 6_000},
        ("OverheadLatency", "Maximum"): {M0: 5_000, M1: 6_000},
        ("CPUUtilization", "Average"): {M0: 150, M1: 300},
        ("CPUUtilization", "Maximum"): {M0: 180, M1: 350},
        ("MemoryUtilization", "Average"): {M0: 41, M1: 50},
        ("MemoryUtilization", "Maximum"): {M0: 42, M1: 50},
        ("Invocations", "Sum"): {M0: 40, M1: 100},
        ("InvocationsPerInstance", "Sum"): {M0: 40, M1: 100},
    }


@pytest.fixture
def merged():
    data = read_run(GOLDEN)
    request = MetricRequest("golden-ep", BASE + 56, BASE + 66, vcpus=4, gpus=0)
    specs = build_queries(request, select_metrics(request))
    raw = cw_points()
    points = {q["Id"]: sorted(raw.get((m.name, s), {}).items()) for m, s, q in specs}
    frame = to_frame(specs, points, request)
    seconds = merge.per_second(data.history)
    seconds = merge.attach_metrics(seconds, frame, 60)
    steps = merge.step_records(seconds, merge.step_spans(data.summary, seconds), 60)
    return data, frame, seconds, steps


def test_column_names():
    assert column_name("ModelLatency", "Average", "ms") == "cw_ModelLatency_avg_ms"
    assert METRICS_BY_NAME["CPUUtilization"].columns() == ["cw_CPUUtilization_avg_pct", "cw_CPUUtilization_max_pct"]
    assert METRICS_BY_NAME["Invocations"].columns() == ["cw_Invocations_sum_count"]
    assert per_unit_column(METRICS_BY_NAME["CPUUtilization"], "Average") == "cw_CPUUtilizationPerVCPU_avg_pct"


def test_cloudwatch_frame_units(merged):
    _, frame, _, _ = merged
    assert list(frame.index) == [M0, M1]
    assert frame.loc[M0, "cw_ModelLatency_avg_ms"] == 80.0  # µs -> ms
    assert frame.loc[M1, "cw_OverheadLatency_avg_ms"] == 6.0
    assert frame.loc[M1, "cw_CPUUtilization_avg_pct"] == 300.0  # summed over cores, kept
    assert frame.loc[M1, "cw_CPUUtilizationPerVCPU_avg_pct"] == 75.0  # 4 vCPUs
    assert not any(c.startswith("cw_GPU") for c in frame.columns)  # gpus=0: not asked for


def test_per_second_rows(merged):
    _, _, s, _ = merged
    assert list(s["epoch_s"]) == list(range(BASE + 56, BASE + 66))
    by_t = s.set_index("epoch_s")
    assert math.isnan(by_t.loc[BASE + 56, "requests"])  # no previous total
    assert by_t.loc[BASE + 57, "requests"] == 10 and by_t.loc[BASE + 57, "avg_ms"] == 100
    assert by_t.loc[BASE + 61, "requests"] == 20 and by_t.loc[BASE + 61, "avg_ms"] == pytest.approx(130)
    assert by_t.loc[BASE + 65, "avg_ms"] == pytest.approx(134)
    assert by_t.loc[BASE + 65, "failures"] == 1
    # each minute's value on the seconds of that minute
    assert by_t.loc[BASE + 59, "cw_ModelLatency_avg_ms"] == 80
    assert by_t.loc[BASE + 60, "cw_ModelLatency_avg_ms"] == 100
    assert by_t.loc[BASE + 59, "cw_Invocations_sum_count"] == 40
    assert by_t.loc[BASE + 60, "cw_CPUUtilizationPerVCPU_avg_pct"] == 75
    timed = merge.with_time(s)
    assert timed.columns[0] == "time" and timed["time"].iloc[4] == "2024-01-01T12:01:00Z"


def test_step_records_exact(merged):
    _, _, _, steps = merged
    one, two = steps.iloc[0], steps.iloc[1]
    assert (one["users"], one["requests"], one["failures"], one["rps"]) == (1, 40, 1, 8.0)
    assert one["error_rate"] == pytest.approx(0.025)
    assert (one["p50_ms"], one["p95_ms"], one["p99_ms"]) == (100, 110, 120)
    # step 1 = 4 s of minute 12:00 + 1 s of minute 12:01, time-weighted
    assert one["cw_ModelLatency_avg_ms"] == pytest.approx((4 * 80 + 100) / 5)
    assert one["cw_ModelLatency_max_ms"] == 100
    assert one["cw_OverheadLatency_avg_ms"] == pytest.approx(5.2)
    assert one["cw_CPUUtilization_avg_pct"] == pytest.approx(180)
    assert one["cw_CPUUtilization_max_pct"] == 350
    assert one["cw_CPUUtilizationPerVCPU_avg_pct"] == pytest.approx(45)
    assert one["cw_MemoryUtilization_avg_pct"] == pytest.approx(42.8)
    # the run covers 4 s of minute 12:00 (its 40 invocations) and 6 s of 12:01 (100: 1/6 each)
    assert one["cw_Invocations_sum_count"] == pytest.approx(40 + 100 / 6)
    assert one["client_avg_ms"] == pytest.approx(100)
    # decomposition over the minutes step 1 touches (12:00 and 12:01: every request of 12:00:57-12:01:05)
    assert (one["decomposition_start"], one["decomposition_end"]) == ("2024-01-01T12:00:56Z", "2024-01-01T12:01:06Z")
    assert one["decomposition_client_avg_ms"] == pytest.approx((40 * 100 + 80 * 130 + 20 * 134) / 140)
    assert one["model_latency_ms"] == pytest.approx((40 * 80 + 100 * 100) / 140)  # weighted by invocations
    assert one["network_client_ms"] == pytest.approx(122 - (40 * 80 + 100 * 100) / 140 - (40 * 5 + 100 * 6) / 140)
    assert two["client_avg_ms"] == pytest.approx(130.8)
    assert two["model_latency_ms"] == pytest.approx(100) and two["overhead_latency_ms"] == pytest.approx(6)
    assert two["decomposition_client_avg_ms"] == pytest.approx((10 * 100 + 80 * 130 + 20 * 134) / 110)
    assert two["network_client_ms"] == pytest.approx(128 - 100 - 6)
    assert two["cw_invocations_per_s"] == pytest.approx(100 * 5 / 6 / 5)


def test_sustainable_point_and_errors(merged):
    data, _, _, steps = merged
    point = merge.sustainable_point(data.summary, steps)
    assert point.rps == 20.0 and point.users == 2 and point.step == 2
    assert "plateau found during the run" in point.source
    assert merge.errors_by_code(data.summary, data.failures) == {"ModelError": 1, "ThrottlingException": 1}
    assert merge.errors_by_code({}, data.failures) == {"ModelError(424)": 1, "ThrottlingException": 1}


def test_steps_from_history_when_summary_has_none(merged):
    data, _, seconds, _ = merged
    spans = merge.step_spans({}, seconds)
    assert [(s.users, s.start_s, s.end_s) for s in spans] == [(1, BASE + 56, BASE + 61),
                                                                       (2, BASE + 61, BASE + 66)]
    steps = merge.step_records(seconds, spans)
    assert list(steps["requests"]) == [40, 100] and list(steps["rps"]) == [8.0, 20.0]
    assert list(steps["p95_ms"]) == [110, 140]
    point = merge.sustainable_point({"plateau": None}, steps)
    assert point.rps == 20.0 and "no plateau" in point.source


def test_error_heavy_step_is_not_sustainable():
    steps = pd.DataFrame({"step": [1, 2], "users": [1, 2], "rps": [10.0, 30.0], "error_rate": [0.0, 0.2],
                          "p50_ms": [1, 2], "p95_ms": [1, 2], "p99_ms": [1, 2]})
    assert merge.sustainable_point({}, steps).rps == 10.0


def test_parse_time():
    assert merge.parse_time("2024-01-01T12:00:00Z") == BASE
    assert merge.parse_time("2024-01-01T12:00:00+00:00") == BASE
    assert merge.parse_time("2024-01-01T12:00:00") == BASE  # naive = UTC
    assert merge.parse_time("garbage") is None and merge.parse_time(None) is None


def synthetic_run(start: int, end: int, rps, avg_ms, minutes: dict[int, dict[str, float]]) -> pd.DataFrame:
    """Merged seconds of a run from `start` to `end` (epoch s): the client's requests and average
    latency per second (functions of t), each minute's CloudWatch values on its seconds."""
    t = list(range(start, end))
    seconds = pd.DataFrame({"epoch_s": t, "requests": [float(rps(x)) for x in t],
                            "failures": 0.0, "avg_ms": [float(avg_ms(x)) for x in t]})
    frame = pd.DataFrame.from_dict(minutes, orient="index")
    return merge.attach_metrics(seconds, frame, 60)


def test_cloudwatch_invocations_read_the_client_rate_on_partial_minutes():
    # 10 req/s from :30 of minute 0 to :30 of minute 2: CloudWatch counts 300, 600, 300
    minutes = {BASE + 60 * i: {"cw_Invocations_sum_count": n} for i, n in enumerate((300, 600, 300))}
    seconds = synthetic_run(BASE + 30, BASE + 150, lambda t: 10, lambda t: 50, minutes)
    spans = [merge.Span(u, BASE + a, BASE + b) for u, a, b in ((1, 30, 40), (2, 60, 120), (3, 140, 150))]
    steps = merge.step_records(seconds, spans, 60)
    assert list(steps["rps"]) == [10.0, 10.0, 10.0]
    assert list(steps["cw_invocations_per_s"]) == pytest.approx([10.0, 10.0, 10.0])  # was 5, 10, 5
    assert merge.bucket_share([BASE + 58, BASE + 59, BASE + 60], 60) == pytest.approx([0.5, 0.5, 1.0])


def test_latency_decomposition_compares_the_same_minutes_and_stays_positive():
    # one minute, two steps: 10 users at 200 ms (model 180), then 1 user at 20 ms (model 10);
    # CloudWatch's one ModelLatency average for the minute is mostly the first step's
    model = (300 * 180 + 30 * 10) / 330
    seconds = synthetic_run(BASE, BASE + 60, lambda t: 10 if t < BASE + 30 else 1,
                            lambda t: 200 if t < BASE + 30 else 20,
                            {BASE: {"cw_Invocations_sum_count": 330, "cw_ModelLatency_avg_ms": model,
                                    "cw_OverheadLatency_avg_ms": 2.0}})
    steps = merge.step_records(seconds, [merge.Span(10, BASE, BASE + 30), merge.Span(1, BASE + 30, BASE + 60)], 60)
    light = steps.iloc[1]
    assert light["client_avg_ms"] == pytest.approx(20)  # the step's own average is unchanged
    assert light["client_avg_ms"] - model - 2 < 0  # what the page showed: a negative network share
    client = (300 * 200 + 30 * 20) / 330  # every request of the minute CloudWatch averaged over
    assert light["decomposition_client_avg_ms"] == pytest.approx(client)
    assert light["network_client_ms"] == pytest.approx(client - model - 2) and light["network_client_ms"] > 0
    assert (light["decomposition_start"], light["decomposition_end"]) == ("2024-01-01T12:00:00Z",
                                                                          "2024-01-01T12:01:00Z")


def test_the_page_says_which_minutes_the_decomposition_covers(merged):
    from sm_locust.report.render import decomposition_text

    text = decomposition_text(merged[3].iloc[0].to_dict())
    assert text.startswith("122.0 = 94.3 + 5.7 + 22.0 ms over 12:00:56-12:01:06 UTC")
    assert "CloudWatch reports whole minutes" in text and "the step's own: 100.0 ms" in text
