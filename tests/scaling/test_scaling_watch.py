"""`sm-locust run --watch-scaling`: an endpoint's own scaling policy watched under the run's traffic.

Against a moto server holding the endpoint, its scalable target and the user's target-tracking policy
(the runtime goes to a local endpoint): the run records the instance timeline DescribeEndpoint gave
every 10 s and the shared figures into summary.json `autoscaling`, and changes nothing (in process,
every call the watch makes is a Describe; as a command, the variant's configuration is the same
before and after). moto does not scale: the test plays Application Auto Scaling with
UpdateEndpointWeightsAndCapacities while the run goes on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import boto3
import pytest

from sm_locust.config.endpoint import SageMakerSettings
from sm_locust.endpoint.fleet import FleetConfig
from sm_locust.record.model import Autoscaling
from sm_locust.scaling.aws import VariantRef, snapshot
from sm_locust.scaling.policy import ScalingPolicy
from sm_locust.scaling.watch import result_line, start_watch
from tests.conftest import SAMPLE_PAYLOAD, assert_one_line_error, run_cli
from tests.fakes import ROLE

REF = VariantRef("ranker", "AllTraffic")
USER_POLICY = {"PolicyName": "prod-invocations", "PolicyType": "TargetTrackingScaling",
               "TargetTrackingScalingPolicyConfiguration": {
                   "TargetValue": 600.0,
                   "PredefinedMetricSpecification": {"PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"},
                   "ScaleOutCooldown": 60, "ScaleInCooldown": 300}}


@pytest.fixture
def aws(moto_url, runtime, monkeypatch, tmp_path):
    """Control plane and Application Auto Scaling -> moto (reset), runtime -> the local endpoint; the endpoint
    `ranker` on ml.c5.xlarge with the user's scalable target (1..4) and policy."""
    urllib.request.urlopen(urllib.request.Request(f"{moto_url}/moto-api/reset", method="POST"), timeout=10).close()
    for service in ("SAGEMAKER", "APPLICATION_AUTO_SCALING"):
        monkeypatch.setenv(f"AWS_ENDPOINT_URL_{service}", moto_url)
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", runtime.url)
    aas, sm = boto3.client("application-autoscaling"), boto3.client("sagemaker")
    sm.create_model(ModelName="ranker", ExecutionRoleArn=ROLE, PrimaryContainer={"Image": "i"})
    sm.create_endpoint_config(EndpointConfigName="ranker", ProductionVariants=[
        {"VariantName": "AllTraffic", "ModelName": "ranker", "InstanceType": "ml.c5.xlarge",
         "InitialInstanceCount": 1}])
    sm.create_endpoint(EndpointName="ranker", EndpointConfigName="ranker")
    aas.register_scalable_target(**REF.identity, MinCapacity=1, MaxCapacity=4)
    aas.put_scaling_policy(**REF.identity, **USER_POLICY)
    (tmp_path / "body.json").write_bytes(SAMPLE_PAYLOAD.read_bytes())
    return aas, sm


def scale(sm, count: int) -> None:
    """What Application Auto Scaling does on a scale event (moto does not scale by itself)."""
    sm.update_endpoint_weights_and_capacities(EndpointName="ranker", DesiredWeightsAndCapacities=[
        {"VariantName": "AllTraffic", "DesiredInstanceCount": count}])


def comparable(aas, sm) -> dict:
    d = snapshot(aas, sm, REF).as_dict()
    d.pop("taken_at")
    return d


def test_the_closing_line_says_every_figure_the_record_holds():
    figures = Autoscaling.of({"scale_events": [{"t_s": 60, "direction": "out", "from": 1, "to": 3}],
                              "peak_instances": 3, "instance_hours": 0.4125, "cost_usd": 0.0949,
                              "slo_breach_s": 40.0, "breach_s_ci95": [31.0, 52.0], "breach_client_bound_s": 5.0,
                              "flaps": 1})
    assert result_line(figures) == ("autoscaling: 1 scale event, peak 3 instances, 0.412 instance-hours ($0.09), "
                                    "40 s [31, 52] over the SLO (5 s of it while the load generator was behind), "
                                    "1 flap")
    bare = Autoscaling.of({"scale_events": [], "peak_instances": 1, "instance_hours": 0.1, "flaps": 0})
    assert result_line(bare) == "autoscaling: 0 scale events, peak 1 instance, 0.100 instance-hours, 0 flaps"


@pytest.mark.e2e
def test_the_watch_only_describes(aws, tmp_path):
    test_sm = aws[1]
    aas, sm = boto3.client("application-autoscaling"), boto3.client("sagemaker")  # the watch's own (made read-only)
    seen: list[str] = []
    for client in (aas, sm):
        client.meta.events.register("before-call", lambda model, **_: seen.append(model.name))
    lines: list[str] = []
    watch = start_watch(SageMakerSettings(endpoint_name="ranker"), say=lines.append, aas=aas, sm=sm)
    scale(test_sm, 3)
    watch.poller.poll_once()
    # said when read (moto scales at once), not at the end
    assert lines[-1] == "scale out done: 1 -> 3 instances in service"
    out = tmp_path / "run"
    out.mkdir()
    started = time.time() - 5
    (out / "summary.json").write_text(json.dumps({
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "totals": {"errors": {"ThrottlingException": 2, "ModelError": 1}}}))
    figures = watch.finish(out, say=lines.append)
    assert seen and all(op.startswith(("Describe", "List")) for op in seen), seen
    assert lines[0] == ("watching the scaling of endpoint/ranker/variant/AllTraffic: scalable target 1..4; policy "
                        "'prod-invocations' TargetTracking SageMakerVariantInvocationsPerInstance 600, cooldowns "
                        "out 60 s / in 300 s; 1 instance on ml.c5.xlarge")
    assert [(e["direction"], e["from"], e["to"]) for e in figures["scale_events"]] == [("out", 1, 3)]
    assert (figures["peak_instances"], figures["throttled"], figures["failed"]) == (3, 2, 1)
    assert figures["policy"]["target_value"] == 600.0 and figures["watched"]["instance_type"] == "ml.c5.xlarge"
    assert json.loads((out / "summary.json").read_text())["autoscaling"] == figures
    assert lines[-1].startswith("autoscaling: 1 scale event, peak 3 instances")


@pytest.mark.e2e
def test_run_watch_scaling_records_the_figures_and_changes_nothing(aws, tmp_path):
    aas, sm = aws
    before = comparable(aas, sm)
    command = [sys.executable, "-m", "sm_locust", "run", "--endpoint-name", "ranker", "--payload", "body.json",
               "--users", "2", "--run-time", "12s", "--latency-slo-ms", "500", "--watch-scaling", "--out", "out", "-q"]
    proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ))
    history = tmp_path / "out" / "locust_stats_history.csv"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (history.exists() and len(history.read_text().splitlines()) >= 3):
        time.sleep(0.2)
    scale(sm, 3)  # a scale-out while the traffic runs: the 10-s reading sees it
    output, _ = proc.communicate(timeout=90)
    assert proc.returncode == 0, output
    doc = json.loads((tmp_path / "out" / "summary.json").read_text())
    figures = doc["autoscaling"]
    assert figures["source"] == "DescribeEndpoint" and figures["watched"]["readings"] >= 3
    assert [(s["desired"], s["in_service"]) for s in figures["instances"]] == [(1, 1), (3, 3)]
    event = figures["scale_events"][0]
    assert (event["direction"], event["from"], event["to"]) == ("out", 1, 3) and 2 < event["t_s"] <= 20
    assert figures["peak_instances"] == 3 and figures["instance_hours"] > 0
    assert figures["cost_usd"] == pytest.approx(figures["instance_hours"] * 0.204, rel=0.05)  # ml.c5.xlarge, bundled
    assert figures["slo_breach_s"] == 0 and figures["failed"] == 0
    assert "sm-locust: watching the scaling of endpoint/ranker/variant/AllTraffic: scalable target 1..4" in output
    assert "sm-locust: scale out 1 -> 3 at" in output
    assert "sm-locust: autoscaling: 1 scale event, peak 3 instances" in output
    after = comparable(aas, sm)
    assert after == {**before, "desired_instances": 3, "in_service_instances": 3}  # only the test's own scale-out


@pytest.mark.e2e
def test_several_variants_need_target_variant_and_nothing_runs(aws, tmp_path):
    _aas, sm = aws
    sm.create_endpoint_config(EndpointConfigName="ab", ProductionVariants=[
        {"VariantName": v, "ModelName": "ranker", "InstanceType": "ml.c5.xlarge", "InitialInstanceCount": 1,
         "InitialVariantWeight": 0.5} for v in ("blue", "green")])
    sm.create_endpoint(EndpointName="ab", EndpointConfigName="ab")
    r = run_cli("run", "--endpoint-name", "ab", "--payload", "body.json", "--run-time", "2s", "--watch-scaling",
                "--out", "out", cwd=tmp_path)
    assert_one_line_error(r, 2, "--watch-scaling: endpoint ab has 2 variants (blue, green)", "--target-variant")
    assert not (tmp_path / "out").exists()
    r = run_cli("run", "--endpoint-name", "missing", "--payload", "body.json", "--run-time", "2s", "--watch-scaling",
                "--out", "out", cwd=tmp_path)
    assert_one_line_error(r, 2, "--watch-scaling: DescribeEndpoint missing: ValidationException")
    assert not (tmp_path / "out").exists()


@pytest.mark.e2e
def test_a_local_endpoint_that_is_not_a_fleet_is_refused(tmp_path, endpoint):
    (tmp_path / "body.json").write_bytes(Path(SAMPLE_PAYLOAD).read_bytes())
    r = run_cli("run", "--endpoint-name", "ranker", "--endpoint-url", endpoint.url, "--payload", "body.json",
                "--run-time", "2s", "--watch-scaling", "--out", "out", cwd=tmp_path)
    assert_one_line_error(r, 2, f"--watch-scaling: the endpoint at {endpoint.url} is not a local fleet")
    assert not (tmp_path / "out").exists()


@pytest.mark.e2e
def test_watch_scaling_against_the_local_fleet_matches_its_own_log(tmp_path, endpoint_factory):
    """The same poller against the fleet emulation, 60 emulated s per real s: a 7-s run is 7 emulated
    minutes, enough for the policy (target 20 invocations per instance per minute, far below what 4 users
    send) to scale out; the desired counts the watch saw are the ones the emulator logged."""
    policy = ScalingPolicy(1, 3, 20.0, scale_out_cooldown_s=60, scale_in_cooldown_s=600).check()
    fleet = endpoint_factory(max_concurrency=2, service_time_ms=20,
                             fleet=FleetConfig(instances=1, policy=policy, instance_start_s=60, time_scale=60))
    (tmp_path / "body.json").write_bytes(SAMPLE_PAYLOAD.read_bytes())
    r = run_cli("run", "--endpoint-name", "ranker", "--endpoint-url", fleet.url, "--payload", "body.json",
                "--users", "4", "--run-time", "7s", "--watch-scaling", "--out", "out", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    figures = json.loads((tmp_path / "out" / "summary.json").read_text())["autoscaling"]
    assert (figures["source"], figures["time_scale"]) == ("local fleet (DescribeEndpoint)", 60.0)
    assert figures["policy"] == policy.as_dict()
    log = json.loads(urllib.request.urlopen(fleet.url + "/_sm_locust/scaling", timeout=5).read())
    logged = [s["desired"] for s in log["instances"]]
    watched = [s["desired"] for s in figures["instances"]]
    assert logged[0] == 1 and max(logged) > 1  # the emulator scaled out
    assert [d for i, d in enumerate(watched) if i == 0 or d != watched[i - 1]] == \
        [d for i, d in enumerate(logged) if i == 0 or d != logged[i - 1]]
    out = figures["scale_events"][0]
    # 3 one-minute periods above the target; the run's periods and the emulator's are not aligned (up to one
    # apart). Past that, each real second of delay on a busy machine is a minute here: the upper end is the
    # run's 7 emulated minutes, not a margin
    assert out["direction"] == "out" and 2 * 60 <= out["reaction_s"] <= 7 * 60
    assert "watching the scaling of the local fleet at" in r.stdout and "time scale 60" in r.stdout
