"""A traffic or watched run's report (report/policy.py): it leads with the policy's verdict, and gives a
per-instance figure only from a step that held the SLO, divided by the instances in service then."""

from __future__ import annotations

import pandas as pd

from sm_locust.record.model import SustainablePoint
from sm_locust.report.policy import RateSlo, instances_during, per_instance_point, policy_lines, rate_slo
from sm_locust.report.render import RateView, ReportModel, charts, closing_rows, headline_rows
from sm_locust.report.slos import RunSlos

STARTED = "2026-01-01T00:00:00.000Z"
# x30: a 1-instance quiet phase within the SLO, a surge a 3-instance fleet drained at p95 7.1 s, the quiet again
INSTANCES = [{"t_s": 0.0, "desired": 1, "in_service": 1}, {"t_s": 480.0, "desired": 3, "in_service": 1},
             {"t_s": 720.0, "desired": 3, "in_service": 3}]


def step(start_s: float, end_s: float, goodput: float, p95: float, high: float | None = None, **extra) -> dict:
    def iso(s: float) -> str:
        return f"2026-01-01T00:{int(s // 60):02d}:{s % 60:06.3f}Z"
    record = {"users": 2, "start": iso(start_s), "end": iso(end_s), "rps": goodput, "goodput_rps": goodput,
              "p50_ms": p95 / 2, "p95_ms": p95, "p99_ms": p95 * 1.2, "error_rate": 0.0, "client_bound": False,
              "ci95": {"p95_ms": [p95 * 0.9, high if high is not None else p95 * 1.1]}}
    return record | extra


def summary(*steps: dict, slo_ms: float | None = 250.0, instances=INSTANCES) -> dict:
    block = {"time_scale": 30.0, "instances": instances, "peak_instances": 3, "instance_hours": 0.73,
             "cost_usd": None, "slo": {"slo_ms": slo_ms, "percentile": 95.0} if slo_ms else None,
             "slo_breach_s": 781.0 if slo_ms else None, "breach_client_bound_s": 0.0,
             "scale_events": [{"t_s": 480.0, "direction": "out", "from": 1, "to": 3, "reaction_s": 180.0,
                               "ready_s": 420.0}], "failed": 0, "throttled": 0, "flaps": 0}
    return {"schema": 1, "started_at": STARTED, "steps": list(steps), "autoscaling": block,
            "traffic": {"phases": [{"duration_s": 300, "rps": 20}], "time_scale": 30.0}}


QUIET = step(1, 9, 20.0, 54)  # run seconds 30-270: one instance
SURGE = step(26, 30, 188.7, 7100)  # run seconds 780-900: three instances, far over the SLO
LATE_QUIET = step(31, 39, 45.0, 60)  # run seconds 930-1170: three instances, within it


def test_the_per_instance_figure_comes_from_a_step_that_held_the_slo_over_its_instances():
    point, why = per_instance_point(summary(QUIET, SURGE), rate_slo(summary(QUIET, SURGE), RunSlos()))
    assert why is None and point.step == 1 and point.instances == 1 and point.goodput_rps == 20.0
    # 45 req/s over the 3 instances in service then: 15 per instance, less than the quiet step's 20 over 1
    point, _ = per_instance_point(summary(QUIET, SURGE, LATE_QUIET), RateSlo(250.0))
    assert point.step == 1
    point, _ = per_instance_point(summary(SURGE, LATE_QUIET), RateSlo(250.0))
    assert (point.step, point.instances) == (2, 3)  # the surge (188.7 req/s) is never the point


def test_no_slo_or_no_step_within_it_means_no_per_instance_figure_and_says_why():
    point, why = per_instance_point(summary(SURGE, slo_ms=None), RateSlo(None))
    assert point is None and "none was given (--latency-slo-ms)" in why
    point, why = per_instance_point(summary(SURGE), RateSlo(250.0))
    assert point is None and why.endswith("no step held the p95 <= 250 ms SLO")
    # the percentile's upper 95 % bound decides: a point within the SLO whose interval is not, is not held
    point, why = per_instance_point(summary(step(1, 9, 20.0, 240, high=260)), RateSlo(250.0))
    assert point is None
    failing = step(1, 9, 20.0, 54, error_rate=0.2)
    assert per_instance_point(summary(failing), RateSlo(250.0))[0] is None


def test_instances_in_service_during_a_window_are_the_most_of_the_timeline_there():
    assert instances_during(INSTANCES, 0, 479) == 1
    assert instances_during(INSTANCES, 700, 730) == 3
    assert instances_during([], 0, 10) is None


def test_the_policy_verdict_rows():
    rows = policy_lines(summary(QUIET)["autoscaling"], RateSlo(250.0), price_per_hour=0.23)
    assert rows == [("Policy verdict (p95 <= 250 ms)", "FAIL: 781 s over the SLO"),
                    ("Scale-out reaction", "1 -> 3: 180 s after the metric crossed, serving 420 s after"),
                    ("Peak instances", "3"), ("Instance-hours and cost", "0.730 ($0.17)")]
    held = dict(summary(QUIET)["autoscaling"], slo_breach_s=0.0, scale_events=[])
    rows = dict(policy_lines(held, RateSlo(250.0)))
    assert rows["Policy verdict (p95 <= 250 ms)"] == "PASS: 0 s over the SLO"
    assert rows["Scale-out reaction"] == "no scale-out during the run"
    assert rows["Instance-hours and cost"] == "0.730 (no price: pass --price-per-hour)"


def model(data: dict, point: SustainablePoint | None, why: str | None, cost: dict | None = None) -> ReportModel:
    slo = rate_slo(data, RunSlos())
    return ReportModel(title="t", run={}, steps=pd.DataFrame(data["steps"]).assign(step=[1, 2][:len(data["steps"])]),
                       seconds=pd.DataFrame(), point=point, cost=cost or {}, errors={},
                       rate=RateView(slo=slo, policy=policy_lines(data["autoscaling"], slo), no_point_reason=why))


def test_the_report_leads_with_the_verdict_and_quotes_no_figure_of_a_breaking_step():
    data = summary(SURGE)
    point, why = per_instance_point(data, RateSlo(250.0))
    rows = headline_rows(model(data, point, why))
    labels = [label for label, _ in rows]
    assert labels[:4] == ["Policy verdict (p95 <= 250 ms)", "Scale-out reaction", "Peak instances",
                          "Instance-hours and cost"]
    text = " ".join(value for _, value in rows)
    assert "188.7" not in text and "Autoscaling target" not in labels and "Max sustainable throughput" not in labels
    assert dict(rows)["Per-instance figures"].endswith("no step held the p95 <= 250 ms SLO")
    assert [label for label, _ in closing_rows(model(data, point, why))][:5] == labels[:4] + ["Per-instance figures"]
    data = summary(QUIET, SURGE)
    point, why = per_instance_point(data, RateSlo(250.0))
    cost = {"rps_per_instance": 20.0, "autoscaling_target_invocations_per_instance": 600.0, "safety_factor": 0.5}
    rows = dict(headline_rows(model(data, point, why, cost)))
    assert rows["Most goodput per instance within the SLO"] == \
        "20.0 req/s per instance (step 1: 20.0 req/s over 1 instance, p95 54 ms)"
    assert rows["Autoscaling target (SageMakerVariantInvocationsPerInstance)"].startswith("600 per minute")


def test_a_rate_run_draws_over_time_never_vs_users():
    data = summary(QUIET, SURGE)
    drawn = []
    charts(model(data, None, "x"), lambda fig, div_id, height=420: drawn.append(div_id),
           lambda div_id, *_: drawn.append(div_id))
    assert drawn and not {"fig-throughput", "fig-latency-users", "fig-endpoint-load"} & set(drawn)


def test_cloudwatch_series_are_labelled_in_words_and_per_minute():
    from sm_locust.report.render import series_label

    assert series_label("cw_CPUUtilization_avg_pct") == "CPUUtilization average % (CloudWatch, per minute)"
    assert series_label("cw_ModelLatency_max_ms") == "ModelLatency maximum ms (CloudWatch, per minute)"
    assert series_label("p95_ms") == "p95"


def test_the_runs_slos_read_from_options_json_typed():
    from sm_locust.record.model import DEFAULT_SLO_PERCENTILE
    from sm_locust.report.pipeline import run_slos

    given = {"options": {"latency_slo_ms": 250, "slo_percentile": 99, "ttft_slo_ms": None, "users": 4}}
    assert run_slos(given) == RunSlos(latency_slo_ms=250, slo_percentile=99) and run_slos(given).percentile == 99
    assert run_slos(None) == RunSlos() and run_slos({"options": {}}).percentile == DEFAULT_SLO_PERCENTILE
    assert RunSlos(ttft_slo_ms=900.0).token_slo_ms("ttft") == 900.0 and RunSlos().token_slo_ms("itl") is None
