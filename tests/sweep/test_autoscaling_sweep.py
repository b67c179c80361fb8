"""The autoscaling sweep kind (sweep/autoscaling/): its section checked, one line and exit 2 for bad
input with nothing created, the plan, and the ranking on synthetic candidates."""

from __future__ import annotations

import pytest

from sm_locust.errors import UsageError
from sm_locust.sweep.api import load_sweep, plan_lines
from sm_locust.sweep.autoscaling.rank import ScalingCandidate, recommend
from sm_locust.sweep.objective import Objective
from tests.conftest import SAMPLE_PAYLOAD, assert_one_line_error, run_cli

SECTION = """\
autoscaling:
  min_instances: [1, 2]
  max_instances: 3
  target_value: 4200
  scale_out_cooldown_s: 60
  instance_start_s: 240
  time_scale: 30
"""
TRAFFIC = "traffic:\n  - {duration_s: 300, rps: 20}\n  - {duration_s: 600, rps: 150}\n"


def sweep_text(section: str = SECTION, traffic: str = TRAFFIC, deploy: str = "local", extra: str = "") -> str:
    endpoint = "endpoint: {service_time_ms: 40, max_concurrency: 4}\n" if deploy == "local" else \
        "endpoint: {endpoint_name: ranker}\n"
    return (f"name: scaling\ndeploy: {deploy}\n{endpoint}{section}{traffic}load: {{payload: {SAMPLE_PAYLOAD}}}\n"
            f"objective: {{slo_ms: 250, percentile: 95, max_breach_s: 0}}\nprice_per_hour: 0.23\n{extra}")


def test_every_list_is_a_grid_axis_and_the_rest_is_shared(tmp_path):
    (tmp_path / "s.yaml").write_text(sweep_text())
    sweep = load_sweep(tmp_path / "s.yaml", out=tmp_path / "out")
    assert [c.label for c in sweep.configurations] == ["min_instances 1", "min_instances 2"]
    settings = sweep.configurations[1].settings
    assert settings["autoscaling.min_instances"] == 2 and settings["autoscaling.max_instances"] == 3
    assert settings["autoscaling.time_scale"] == 30 and settings["max_concurrency"] == 4
    lines = plan_lines(sweep)
    assert "--instances 2" in lines[2] and "--min-instances 2 --max-instances 3 --target-value 4200" in lines[2]
    assert "a new instance serves after 240 s; time runs x30" in lines[2]
    assert not (tmp_path / "out").exists()  # --plan creates nothing


def test_one_policy_without_lists_is_a_sweep_of_one_named_by_its_settings(tmp_path):
    """Was: "grid: missing", for a user who wants to know whether the one policy they have holds."""
    (tmp_path / "s.yaml").write_text(sweep_text(SECTION.replace("[1, 2]", "2")))
    sweep = load_sweep(tmp_path / "s.yaml", out=tmp_path / "out")
    assert [c.label for c in sweep.configurations] == [
        "min_instances 2, max_instances 3, target_value 4200, scale_out_cooldown_s 60"]
    assert "plan for 'scaling': 1 configuration on local" in plan_lines(sweep)[0]


@pytest.mark.parametrize("section, traffic, deploy, needle", [
    (SECTION.replace("min_instances: [1, 2]", "min_instances: [1, 4]"), TRAFFIC, "local",
     "autoscaling.min_instances (4) is above autoscaling.max_instances (3)"),
    (SECTION.replace("target_value: 4200", "target_value: 0"), TRAFFIC, "local",
     "autoscaling.target_value: must be more than 0, got 0"),
    (SECTION, "traffic: []\n", "local", "traffic is empty"),
    (SECTION, "", "local", "traffic: missing: an autoscaling sweep needs the traffic"),
    (SECTION, TRAFFIC, "sagemaker", "autoscaling.instance_start_s: local emulation only"),
    (SECTION.replace("  instance_start_s: 240\n", ""), TRAFFIC, "sagemaker",
     "autoscaling.time_scale: local emulation only"),
    (SECTION + "  metric: CPUUtilization\n", TRAFFIC, "local",
     "autoscaling.metric: unknown scaling metric 'CPUUtilization'; choose one of"),
])
def test_bad_autoscaling_input_is_one_line_exit_2_and_creates_nothing(tmp_path, section, traffic, deploy, needle):
    (tmp_path / "s.yaml").write_text(sweep_text(section, traffic, deploy))
    r = run_cli("sweep", "s.yaml", "--out", "out", "--yes", cwd=tmp_path, timeout=60)
    assert_one_line_error(r, 2, needle)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("extra, needle", [
    ("configurations: [{max_concurrency: 2}]\n", "configurations: an autoscaling sweep's configurations are"),
    ("load: {payload: PAYLOAD, users: 3}\n", "load.users conflicts with the traffic shape: the shape decides the load"),
])
def test_keys_that_make_no_sense_for_autoscaling_are_refused(tmp_path, extra, needle):
    text = sweep_text().replace(f"load: {{payload: {SAMPLE_PAYLOAD}}}\n", "")
    text += extra.replace("PAYLOAD", str(SAMPLE_PAYLOAD))
    if "load:" not in extra:
        text += f"load: {{payload: {SAMPLE_PAYLOAD}}}\n"
    (tmp_path / "s.yaml").write_text(text)
    with pytest.raises(UsageError) as info:
        load_sweep(tmp_path / "s.yaml")
    assert needle in info.value.message


def test_max_breach_s_belongs_to_autoscaling_sweeps(tmp_path):
    (tmp_path / "s.yaml").write_text(f"name: rt\ngrid: {{max_concurrency: [2]}}\nload: {{payload: {SAMPLE_PAYLOAD}}}\n"
                                     "objective: {slo_ms: 250, max_breach_s: 0}\n")
    with pytest.raises(UsageError, match="objective.max_breach_s: applies to autoscaling sweeps"):
        load_sweep(tmp_path / "s.yaml")
    (tmp_path / "t.yaml").write_text(f"name: rt\ngrid: {{max_concurrency: [2]}}\ntraffic: [{{duration_s: 5, rps: 1}}]\n"
                                     f"load: {{payload: {SAMPLE_PAYLOAD}}}\n")
    with pytest.raises(UsageError, match="traffic: applies to autoscaling sweeps only; add an autoscaling: section"):
        load_sweep(tmp_path / "t.yaml")


# -- ranking ---------------------------------------------------------------------------------------------------

OBJECTIVE = Objective(slo_ms=250, percentile=95, max_breach_s=0)


def test_the_cheapest_configuration_within_the_breach_budget_wins():
    breached = ScalingCandidate(1, "min_instances 1", cost_usd=0.17, instance_hours=0.75, peak_instances=3,
                                slo_breach_s=310, breach_cause="310 s over the SLO while 2 instances started",
                                reaction_s=180, ready_s=420)
    held = ScalingCandidate(2, "min_instances 2", cost_usd=0.20, instance_hours=0.86, peak_instances=3,
                            slo_breach_s=0, reaction_s=180, ready_s=420)
    pricier = ScalingCandidate(3, "min_instances 3", cost_usd=0.28, instance_hours=1.2, peak_instances=3,
                               slo_breach_s=0)
    rec = recommend([breached, held, pricier], OBJECTIVE)
    assert rec.winner is held
    assert rec.reason == ("min_instances 2: 0 s over the p95 250 ms SLO, $0.20 for the traffic (0.86 instance-hours, "
                          "peak 3 instances); scale-out 180 s after the metric crossed, serving 420 s after")
    assert rec.lost == {1: "310 s over the SLO while 2 instances started",
                        3: "$0.28 for the traffic, 40 % more than min_instances 2"}


def test_a_breach_budget_and_the_error_budget_are_honoured():
    objective = Objective(slo_ms=250, max_breach_s=400, max_error_rate=0.01)
    within = ScalingCandidate(1, "a", cost_usd=0.1, slo_breach_s=310)
    failing = ScalingCandidate(2, "b", cost_usd=0.05, slo_breach_s=0, error_rate=0.2)
    rec = recommend([within, failing], objective)
    assert rec.winner is within
    assert rec.lost[2] == "20 % of requests failed or were throttled (budget 1 %)"


def test_nothing_meets_the_objective_says_why_each_lost():
    rec = recommend([ScalingCandidate(1, "a", cost_usd=0.1, slo_breach_s=60, breach_cause="60 s over the SLO"),
                     ScalingCandidate(2, "b", status="failed", reason="the endpoint did not start")], OBJECTIVE)
    assert rec.winner is None
    assert rec.reason == ("no configuration meets the objective (a: 60 s over the SLO; "
                          "b: failed: the endpoint did not start)")
