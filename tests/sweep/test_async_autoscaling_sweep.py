"""An autoscaling sweep of an async variant (`autoscaling.async_target_backlog`): backlog target
tracking against it with the scale-from-zero step policy, on the local endpoint (`serve --async
--async-max-instances`) and moto as S3: the plan says so, bad input is one line, and the run reports
each policy's scale events, instance-hours and cold start from zero."""

from __future__ import annotations

import json

import pytest

from sm_locust.sweep.api import load_sweep, plan_lines
from tests.conftest import SAMPLE_PAYLOAD, assert_one_line_error, run_cli
from tests.fakes import moto_with_input

BUCKET = "async-sweep"


def sweep_text(s3_url: str = "http://127.0.0.1:9", section: str = "") -> str:
    section = section or ("autoscaling:\n  max_instances: 2\n  async_target_backlog: 10\n"
                          "  scale_from_zero: [false, true]\n  instance_start_s: 120\n  time_scale: 60\n")
    return (f"name: async-scaling\ndeploy: local\n"
            f"endpoint: {{service_time_ms: 50, async_output_path: 's3://{BUCKET}/out', async_s3_url: '{s3_url}', "
            f"async_max_concurrent: 2}}\n{section}"
            "traffic:\n  - {duration_s: 540, rps: 1}\n  - {duration_s: 180, rps: 0}\n"
            f"load: {{payload: {SAMPLE_PAYLOAD}, async_input_location: 's3://{BUCKET}/in/request.json', "
            f"async_result: s3, async_poll_ms: 50, async_timeout: 12}}\n"
            f"objective: {{slo_ms: 5000, percentile: 95, max_breach_s: 600}}\nprice_per_hour: 0.23\n")


@pytest.mark.e2e
def test_the_two_policies_are_a_grid_axis_and_the_plan_names_the_async_instances(tmp_path):
    (tmp_path / "s.yaml").write_text(sweep_text())
    sweep = load_sweep(tmp_path / "s.yaml", out=tmp_path / "out")
    assert [c.label for c in sweep.configurations] == ["scale_from_zero false", "scale_from_zero true"]
    lines = plan_lines(sweep)
    assert "--async-max-instances 2 --async-instances 0 --async-min-instances 0" in lines[1]
    assert "--async-scale-from-zero" not in lines[1] and "--async-scale-from-zero" in lines[2]
    assert "target tracking ApproximateBacklogSizePerInstance = 10" in lines[2]
    assert not (tmp_path / "out").exists()


@pytest.mark.e2e
@pytest.mark.parametrize(("section", "needle"), [
    ("autoscaling:\n  max_instances: 2\n  scale_from_zero: true\n", "async_target_backlog: missing"),
    ("autoscaling:\n  max_instances: 2\n  async_target_backlog: 5\n  target_value: 70\n",
     "autoscaling.target_value: the real-time policy's"),
    ("autoscaling:\n  max_instances: 2\n  async_target_backlog: 5\n  scale_from_zero: yes please\n",
     "expected true or false"),
])
def test_bad_async_autoscaling_input_is_one_line_exit_2(tmp_path, section, needle):
    (tmp_path / "s.yaml").write_text(sweep_text(section=section))
    r = run_cli("sweep", "s.yaml", "--out", "out", "--yes", cwd=tmp_path, timeout=60)
    assert_one_line_error(r, 2, needle)
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    yield from moto_with_input(tmp_path_factory.mktemp("moto"), BUCKET, SAMPLE_PAYLOAD.read_bytes())


@pytest.mark.e2e
def test_the_sweep_compares_the_policies_from_zero(moto, tmp_path):
    """9 requests in 9 s to an endpoint scaled to zero, the emulated minute a real second, then 3 s without
    (the last results come in): target tracking alone (target 10) never starts an instance; with the step
    policy one serves, at a cost, and the first request's cold start is there."""
    (tmp_path / "s.yaml").write_text(sweep_text(moto.url))
    r = run_cli("sweep", "s.yaml", "--out", "out", "--yes", cwd=tmp_path, timeout=300, env=moto.env())
    assert r.returncode in (0, 1), r.stdout + r.stderr
    document = json.loads((tmp_path / "out" / "sweep.json").read_text())
    rows = {row["label"]: row for row in document["configurations"]}
    alone, woken = rows["scale_from_zero false"], rows["scale_from_zero true"]
    assert alone["peak_instances"] == 0 and alone["first_time_to_result_ms"] is None
    assert alone["awaited"] == alone["requests"] > 0 and alone["error_rate"] == 1.0  # none answered
    assert woken["peak_instances"] == 1 and woken["instance_hours"] > 0 and woken["scale_events"][0]["from"] == 0
    assert woken["first_time_to_result_ms"] >= 4000  # 2 alarm minutes + 120 s of start, at x60
    assert woken["emulator_instances"][-1]["in_service"] == 1  # the emulator's own log, beside the watch's
    # target tracking alone is not recommended for being cheap: its requests never got a result
    assert "had no result" in alone["lost_because"], alone["lost_because"]
    assert document["recommendation"]["label"] == "scale_from_zero true", document["recommendation"]
    reason = document["recommendation"]["reason"]
    assert "never scaled out" not in reason and "s after it (the cold start)" in reason, reason
