"""`deploy: sagemaker` of an autoscaling sweep, against a moto server (SageMaker control plane and
Application Auto Scaling on 127.0.0.1; the runtime goes to a local endpoint). moto answers the calls
but scales nothing, so these tests hold the calls, the polling and the restore to account:

- an existing endpoint with the user's own scalable target and target-tracking policy: each
  configuration's policy is on the variant while its traffic runs (the watch in its summary.json
  names it), and afterwards the variant's scaling configuration is exactly what it was, after a
  full run, after SIGINT and SIGTERM sent as a script sends them, and after `kill -9` + `--cleanup`;
- an endpoint the sweep deploys: nothing it created is left;
- bad input (the emulation's keys, an endpoint named twice): one line, exit 2, nothing created;
- a variant with a step scaling policy: refused before anything changes.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import boto3
import psutil
import pytest

from sm_locust.scaling.aws import VariantRef, snapshot
from tests.conftest import SAMPLE_PAYLOAD, assert_one_line_error, run_cli
from tests.fakes import NOTHING, leftovers, moto_sagemaker
from tests.starved import skip_if_the_load_generator_was_the_bottleneck

pytestmark = pytest.mark.e2e  # every test here starts a server, a process or Locust

REF = VariantRef("ranker", "AllTraffic")
USER_POLICY = {"PolicyName": "prod-invocations", "PolicyType": "TargetTrackingScaling",
               "TargetTrackingScalingPolicyConfiguration": {
                   "TargetValue": 600.0,
                   "PredefinedMetricSpecification": {"PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"},
                   "ScaleOutCooldown": 120, "ScaleInCooldown": 600}}
SUSPENDED = {"DynamicScalingInSuspended": False, "DynamicScalingOutSuspended": True, "ScheduledScalingSuspended": False}

EXISTING = """\
name: ranker-scaling
deploy: sagemaker
endpoint: {endpoint_name: ranker, instance_type: ml.c5.xlarge}
autoscaling:
  min_instances: [1, 2]
  max_instances: 3
  target_value: 4200
  scale_out_cooldown_s: 60
  scale_in_cooldown_s: 300
traffic:
  - {duration_s: %(first)s, rps: 10}
  - {duration_s: %(second)s, rps: 20}
load: {payload: body.json}
objective: {slo_ms: 250, percentile: 95, max_breach_s: 0}
"""


@pytest.fixture
def aws(moto_url, runtime, monkeypatch, tmp_path):
    """(application-autoscaling, sagemaker) on moto (reset), runtime -> the local endpoint; `my-model` exists and
    the endpoint `ranker` (1 x ml.c5.xlarge) carries the user's scalable target (1..4, scale-out suspended) and
    target-tracking policy."""
    sm = moto_sagemaker(moto_url, runtime.url, monkeypatch)
    monkeypatch.setenv("AWS_ENDPOINT_URL_APPLICATION_AUTO_SCALING", moto_url)
    aas = boto3.client("application-autoscaling", region_name="us-east-1")
    sm.create_endpoint_config(EndpointConfigName="ranker", ProductionVariants=[
        {"VariantName": "AllTraffic", "ModelName": "my-model", "InstanceType": "ml.c5.xlarge",
         "InitialInstanceCount": 1}])
    sm.create_endpoint(EndpointName="ranker", EndpointConfigName="ranker")
    aas.register_scalable_target(**REF.identity, MinCapacity=1, MaxCapacity=4, SuspendedState=SUSPENDED)
    aas.put_scaling_policy(**REF.identity, **USER_POLICY)
    (tmp_path / "body.json").write_bytes(SAMPLE_PAYLOAD.read_bytes())
    return aas, sm


def state(aas, sm) -> dict:
    """The variant's scaling configuration and instance count, and every sm-locust policy anywhere."""
    d = snapshot(aas, sm, REF).as_dict()
    d.pop("taken_at")
    d["sm-locust policies"] = [p["PolicyName"] for p in aas.describe_scaling_policies(ServiceNamespace="sagemaker")
                               ["ScalingPolicies"] if p["PolicyName"].startswith("sm-locust-")]
    return d


def write(tmp_path, first: float = 1, second: float = 1) -> None:
    (tmp_path / "sweep.yaml").write_text(EXISTING % {"first": first, "second": second})


def journals(tmp_path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((tmp_path / "out" / "autoscaling-restore").glob("*.json"))]


@pytest.mark.timeout(600)  # beside CPU hogs: each configuration measured twice, Locust started 4 times (> 240 s)
def test_an_existing_endpoints_scaling_is_tested_then_put_back_exactly(aws, tmp_path):
    aas, sm = aws
    before = state(aas, sm)
    write(tmp_path)
    r = run_cli("sweep", "sweep.yaml", "--yes", "--out", "out", cwd=tmp_path, timeout=540)  # a hung sweep's guard
    # put back exactly, whatever the measurement said
    assert state(aas, sm) == before, r.stdout + r.stderr
    assert [j["state"] for j in journals(tmp_path)] == ["restored"]
    assert "sm-locust sweep: " in r.stdout and "policy 'prod-invocations' back" in r.stdout
    doc = json.loads((tmp_path / "out" / "sweep.json").read_text())
    skip_if_the_load_generator_was_the_bottleneck(doc, r)  # a starved machine: INCONCLUSIVE is right
    assert r.returncode == 0, r.stdout + r.stderr
    assert [c["status"] for c in doc["configurations"]] == ["ok", "ok"], r.stdout
    for row, low in zip(doc["configurations"], (1, 2), strict=True):
        watched = json.loads((tmp_path / "out" / row["run_dir"] / "summary.json").read_text())["autoscaling"]["watched"]
        assert watched["scaling"].startswith(f"endpoint/ranker/variant/AllTraffic: scalable target {low}..3 "
                                             "(suspended: ScheduledScaling); policy 'sm-locust-ranker-scaling' "
                                             "TargetTracking SageMakerVariantInvocationsPerInstance 4200, cooldowns "
                                             f"out 60 s / in 300 s; {low} instance")
        assert row["deployed"]["existing"] is True and "prod-invocations" in row["deployed"]["scaling_before"]


@pytest.mark.parametrize("signame, code", [("INT", 130), ("TERM", 143)])
def test_a_signal_during_the_traffic_puts_the_scaling_back(aws, tmp_path, signame, code):
    aas, sm = aws
    before = state(aas, sm)
    write(tmp_path, first=60, second=60)
    script = (f"{sys.executable} -m sm_locust sweep sweep.yaml --yes --out out > sweep.log 2>&1 & pid=$!; "
              # until the traffic runs (no deadline: a sweep that ended first fails on its exit code below)
              "until ls out/*/locust_stats_history.csv > /dev/null 2>&1; do kill -0 $pid || break; sleep 0.1; done; "
              f"sleep 1; kill -{signame} $pid; wait $pid")
    r = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=180)
    log = (tmp_path / "sweep.log").read_text()
    assert r.returncode == code, log
    assert "policy 'prod-invocations' back" in log
    assert state(aas, sm) == before, log
    assert [j["state"] for j in journals(tmp_path)] == ["restored"]
    assert not [p for p in psutil.process_iter(["cmdline"])
                if str(tmp_path / "out") in " ".join(p.info["cmdline"] or [])]


def until(condition, proc: subprocess.Popen, log) -> None:
    """Poll `condition` until it holds; the sweep `proc` ending first fails the test with its log. No
    deadline of its own: a slow machine only waits longer (pytest-timeout guards a hang)."""
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"the sweep ended (exit {proc.returncode}) before the test could kill it:\n{log.read_text()}")
        time.sleep(0.1)


def kill_the_sweep(proc: subprocess.Popen, out) -> None:
    """SIGKILL the sweep's process group, then any Locust it started (in a session of its own): nothing restores."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    for p in psutil.process_iter(["cmdline"]):
        if str(out) in " ".join(p.info["cmdline"] or []):
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()


def test_cleanup_finishes_the_restore_after_a_kill(aws, tmp_path):
    aas, sm = aws
    before = state(aas, sm)
    write(tmp_path, first=60, second=60)
    log = tmp_path / "sweep.log"
    with log.open("w") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "sm_locust", "sweep", "sweep.yaml", "--yes", "--out", "out"],
                                cwd=tmp_path, stdout=sink, stderr=subprocess.STDOUT, env=dict(os.environ),
                                start_new_session=True)
    try:  # killed during the traffic: its Locust writes the history once the load runs
        until(lambda: bool(list((tmp_path / "out").glob("*/locust_stats_history.csv"))), proc, log)
        # the order the restore rests on: the policy was applied, and journaled so, before any traffic
        assert [j["state"] for j in journals(tmp_path)] == ["applied"], log.read_text()
    finally:
        kill_the_sweep(proc, tmp_path / "out")
    during = state(aas, sm)
    assert during["sm-locust policies"] == ["sm-locust-ranker-scaling"] and during != before
    r = run_cli("sweep", "--cleanup", "ranker-scaling", "--out", "out", cwd=tmp_path)  # the folder says its kind
    assert r.returncode == 0, r.stdout + r.stderr
    assert "scaling of endpoint/ranker/variant/AllTraffic" in r.stdout
    assert state(aas, sm) == before
    assert [j["state"] for j in journals(tmp_path)] == ["restored"]
    again = run_cli("sweep", "sweep.yaml", "--cleanup", "ranker-scaling", "--out", "out", cwd=tmp_path)
    assert again.returncode == 0 and "deleted 0" in again.stdout


def test_a_deployed_endpoint_leaves_nothing(aws, tmp_path):
    aas, sm = aws
    (tmp_path / "sweep.yaml").write_text(
        "name: fresh\ndeploy: sagemaker\nendpoint: {model_name: my-model, instance_type: ml.c5.xlarge}\n"
        "autoscaling: {min_instances: [2], max_instances: 3, target_value: 4200}\n"
        "traffic: [{duration_s: 1, rps: 10}]\nload: {payload: body.json}\n")
    r = run_cli("sweep", "sweep.yaml", "--yes", "--out", "out", cwd=tmp_path, timeout=180)
    doc = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert doc["configurations"][0]["status"] == "ok", r.stdout + r.stderr
    assert doc["configurations"][0]["deployed"]["instance_count"] == 2
    assert leftovers(sm) == {**NOTHING, "endpoints": ["ranker"], "configs": ["ranker"]}
    targets = aas.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"]
    assert [t["ResourceId"] for t in targets] == [REF.resource_id]  # the user's, untouched
    assert state(aas, sm)["sm-locust policies"] == []


@pytest.mark.parametrize("extra, needle", [
    ("  time_scale: 30\n", "autoscaling.time_scale: local emulation only"),
    ("  instance_start_s: 240\n", "autoscaling.instance_start_s: local emulation only"),
])
def test_the_emulations_keys_are_refused_on_sagemaker_and_nothing_is_created(aws, tmp_path, extra, needle):
    aas, sm = aws
    before = state(aas, sm)
    text = EXISTING % {"first": 2, "second": 2}
    (tmp_path / "sweep.yaml").write_text(text.replace("  scale_in_cooldown_s: 300\n",
                                                      "  scale_in_cooldown_s: 300\n" + extra))
    r = run_cli("sweep", "sweep.yaml", "--yes", "--out", "out", cwd=tmp_path)
    assert_one_line_error(r, 2, needle)
    assert state(aas, sm) == before and not (tmp_path / "out").exists()


def test_instance_count_is_the_minimums_job(aws, tmp_path):
    (tmp_path / "sweep.yaml").write_text((EXISTING % {"first": 2, "second": 2}).replace(
        "endpoint: {endpoint_name: ranker, instance_type: ml.c5.xlarge}",
        "endpoint: {model_name: my-model, instance_type: ml.c5.xlarge, instance_count: 2}"))
    r = run_cli("sweep", "sweep.yaml", "--plan", cwd=tmp_path)
    assert_one_line_error(r, 2, "endpoint.instance_count: an autoscaling sweep starts every configuration at "
                          "autoscaling.min_instances")


def test_an_endpoint_named_twice_is_refused(aws, tmp_path):
    (tmp_path / "sweep.yaml").write_text((EXISTING % {"first": 2, "second": 2}).replace(
        "endpoint: {endpoint_name: ranker, instance_type: ml.c5.xlarge}",
        "endpoint: {endpoint_name: ranker, model_name: my-model, instance_type: ml.c5.xlarge}"))
    r = run_cli("sweep", "sweep.yaml", "--yes", "--out", "out", cwd=tmp_path)
    assert_one_line_error(r, 2, "endpoint.model_name: endpoint_name tests the existing endpoint ranker")
    assert leftovers(aws[1]) == {**NOTHING, "endpoints": ["ranker"], "configs": ["ranker"]}


def test_a_step_scaling_policy_is_refused_before_anything_changes(aws, tmp_path):
    aas, sm = aws
    aas.put_scaling_policy(**REF.identity, PolicyName="cpu-steps", PolicyType="StepScaling",
                           StepScalingPolicyConfiguration={"AdjustmentType": "ChangeInCapacity", "StepAdjustments": [
                               {"MetricIntervalLowerBound": 0.0, "ScalingAdjustment": 1}]})
    before = state(aas, sm)
    write(tmp_path)
    r = run_cli("sweep", "sweep.yaml", "--yes", "--out", "out", cwd=tmp_path, timeout=120)
    assert r.returncode == 1
    doc = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert {c["status"] for c in doc["configurations"]} == {"failed"}
    assert "StepScaling policy 'cpu-steps'" in doc["configurations"][0]["reason"]
    assert state(aas, sm) == before


def test_without_yes_the_question_says_what_happens_to_the_existing_endpoint(aws, tmp_path):
    aas, sm = aws
    before = state(aas, sm)
    write(tmp_path)
    r = subprocess.run([sys.executable, "-m", "sm_locust", "sweep", "sweep.yaml", "--out", "out"], cwd=tmp_path,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert_one_line_error(r, 2, "this sweep would test 2 policies on the existing endpoint ranker, one after another "
                          "(its own scaling put back after each; nothing created)", "--plan", "--yes")
    assert state(aas, sm) == before


def test_one_variant_of_several_is_tested_and_targeted(aws, tmp_path):
    aas, sm = aws
    sm.create_endpoint_config(EndpointConfigName="ab", ProductionVariants=[
        {"VariantName": v, "ModelName": "my-model", "InstanceType": "ml.c5.xlarge", "InitialInstanceCount": 1,
         "InitialVariantWeight": 0.5} for v in ("blue", "green")])
    sm.create_endpoint(EndpointName="ab", EndpointConfigName="ab")
    green = VariantRef("ab", "green")
    aas.register_scalable_target(**green.identity, MinCapacity=1, MaxCapacity=2)
    before = snapshot(aas, sm, green).as_dict()
    (tmp_path / "sweep.yaml").write_text((EXISTING % {"first": 1, "second": 1}).replace(
        "endpoint: {endpoint_name: ranker, instance_type: ml.c5.xlarge}",
        "endpoint: {endpoint_name: ab, variant_name: green}").replace("min_instances: [1, 2]", "min_instances: [1]"))
    r = run_cli("sweep", "sweep.yaml", "--yes", "--out", "out", cwd=tmp_path, timeout=180)
    doc = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert doc["configurations"][0]["status"] == "ok", r.stdout + r.stderr
    run_dir = tmp_path / "out" / doc["configurations"][0]["run_dir"]
    watched = json.loads((run_dir / "summary.json").read_text())["autoscaling"]["watched"]
    assert watched["resource_id"] == "endpoint/ab/variant/green"
    assert json.loads((run_dir / "options.json").read_text())["sm_locust"]["target_variant"] == "green"
    after = snapshot(aas, sm, green).as_dict()
    assert {k: v for k, v in after.items() if k != "taken_at"} == {k: v for k, v in before.items() if k != "taken_at"}
    assert snapshot(aas, sm, VariantRef("ab", "blue")).target is None  # the other variant untouched
