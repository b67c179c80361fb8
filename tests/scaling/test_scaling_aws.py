"""`sm_locust.scaling.aws`: the variant's scaling configuration snapshotted, changed for a test, put back.

First the pure plans on synthetic snapshots (what apply and restore would call, and that a second
restore calls nothing), then the same against a moto server (Application Auto Scaling and the
SageMaker control plane answer there; nothing scales): a user's target and policy come back after a
full cycle, after a failed apply and after an interrupted one; a variant without a target is left
without one, at its old instance count; the journal lets another process finish the restore;
the read-only client refuses changes; the poller turns DescribeEndpoint into the instance timeline.
"""

from __future__ import annotations

import json
import threading
import urllib.request

import boto3
import pytest
from botocore.exceptions import ClientError

from sm_locust.errors import UsageError
from sm_locust.scaling.aws import (
    DIMENSION,
    InstancePoller,
    ReadOnlyViolation,
    ScalingError,
    ScalingSnapshot,
    ScalingUnderTest,
    VariantRef,
    apply_plan,
    check_restorable,
    delete_sweep_policies,
    finish_restores,
    journal_path,
    read_journal,
    read_only,
    restore_plan,
    snapshot,
)
from sm_locust.scaling.policy import ScalingPolicy
from sm_locust.scaling.timeline import InstanceSample, RunClock
from tests.fakes import ROLE

REF = VariantRef("ranker", "AllTraffic")
OURS = "sm-locust-ranker-scaling"


def Policy(min_instances: int = 2, max_instances: int = 3) -> ScalingPolicy:  # noqa: N802 (reads as the policy)
    return ScalingPolicy(min_instances, max_instances, 4200.0, scale_out_cooldown_s=60, scale_in_cooldown_s=300).check()


INVOCATIONS = {"PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"}
USER_POLICY = {"PolicyName": "prod-invocations", "PolicyType": "TargetTrackingScaling",
               "TargetTrackingScalingPolicyConfiguration": {
                   "TargetValue": 70.0, "PredefinedMetricSpecification": INVOCATIONS,
                   "ScaleOutCooldown": 120, "ScaleInCooldown": 600}}
USER_TARGET = {"MinCapacity": 1, "MaxCapacity": 4, "SuspendedState": {"DynamicScalingInSuspended": True,
                                                                     "DynamicScalingOutSuspended": False,
                                                                     "ScheduledScalingSuspended": False}}


def snap(target=USER_TARGET, policies=(USER_POLICY,), desired=1) -> ScalingSnapshot:
    return ScalingSnapshot(REF, dict(target) if target else None, [dict(p) for p in policies], desired, desired,
                           "InService")


def ops(calls) -> list[tuple[str, str]]:
    return [(c.operation, c.kwargs.get("PolicyName", "")) for c in calls]


# ---------------------------------------------------------------------------------------- pure plans


def test_apply_removes_the_users_policy_sets_the_range_starts_at_the_minimum_then_puts_ours():
    calls = apply_plan(snap(), Policy(), OURS)
    assert ops(calls) == [("delete_scaling_policy", "prod-invocations"), ("register_scalable_target", ""),
                          ("settle", ""), ("put_scaling_policy", OURS)]
    register, settle, put = calls[1].kwargs, calls[2].kwargs, calls[3].kwargs
    assert (register["ResourceId"], register["ScalableDimension"]) == ("endpoint/ranker/variant/AllTraffic", DIMENSION)
    assert (register["MinCapacity"], register["MaxCapacity"]) == (2, 3)
    assert register["SuspendedState"] == {"DynamicScalingInSuspended": False, "DynamicScalingOutSuspended": False,
                                          "ScheduledScalingSuspended": True}
    assert settle == {"instances": 2, "wait": True}
    assert put["PolicyType"] == "TargetTrackingScaling"
    assert put["TargetTrackingScalingPolicyConfiguration"] == {
        "TargetValue": 4200.0, "PredefinedMetricSpecification": INVOCATIONS,
        "ScaleOutCooldown": 60, "ScaleInCooldown": 300}
    assert calls[3].why == (f"policy {OURS!r} TargetTracking SageMakerVariantInvocationsPerInstance 4200, "
                            "cooldowns out 60 s / in 300 s")


def test_restore_puts_back_range_suspended_state_policy_and_count_and_a_second_restore_calls_nothing():
    before = snap()
    during = snap(target={"MinCapacity": 2, "MaxCapacity": 3, "SuspendedState": {"ScheduledScalingSuspended": True}},
                  policies=[{"PolicyName": OURS, "PolicyType": "TargetTrackingScaling",
                             "TargetTrackingScalingPolicyConfiguration": {"TargetValue": 4200.0}}], desired=3)
    calls = restore_plan(before, during, OURS)
    assert ops(calls) == [("delete_scaling_policy", OURS), ("register_scalable_target", ""),
                          ("put_scaling_policy", "prod-invocations"), ("settle", "")]
    assert calls[1].kwargs["SuspendedState"] == USER_TARGET["SuspendedState"]
    assert (calls[1].kwargs["MinCapacity"], calls[1].kwargs["MaxCapacity"]) == (1, 4)
    put = dict(calls[2].kwargs)
    assert {k: put[k] for k in USER_POLICY} == USER_POLICY and put["ResourceId"] == REF.resource_id
    assert calls[3].kwargs == {"instances": 1, "wait": False}
    assert restore_plan(before, before, OURS) == []


def test_restore_without_an_earlier_target_deregisters_it_and_sets_the_count_back():
    before = snap(target=None, policies=(), desired=1)
    during = snap(target={"MinCapacity": 1, "MaxCapacity": 3},
                  policies=[{"PolicyName": OURS, "PolicyType": "TargetTrackingScaling"}], desired=3)
    assert ops(restore_plan(before, during, OURS)) == [("delete_scaling_policy", OURS),
                                                       ("deregister_scalable_target", ""), ("settle", "")]
    half_done = snap(target=None, policies=(), desired=3)  # killed after the deregistration
    assert ops(restore_plan(before, half_done, OURS)) == [("settle", "")]
    assert restore_plan(before, half_done, OURS, instances=False) == []  # an endpoint about to be deleted


def test_a_changed_user_policy_is_put_back_and_a_missing_suspended_flag_counts_as_false():
    before = snap(target={"MinCapacity": 1, "MaxCapacity": 4, "SuspendedState": {}})
    config = {**USER_POLICY["TargetTrackingScalingPolicyConfiguration"], "TargetValue": 99.0}
    tweaked = dict(USER_POLICY, TargetTrackingScalingPolicyConfiguration=config)
    now = snap(target={"MinCapacity": 1, "MaxCapacity": 4, "SuspendedState": {"DynamicScalingInSuspended": False}},
               policies=[tweaked])
    assert ops(restore_plan(before, now, OURS)) == [("put_scaling_policy", "prod-invocations")]


def test_a_step_scaling_policy_is_refused_before_anything_changes():
    step = {"PolicyName": "cpu-steps", "PolicyType": "StepScaling",
            "StepScalingPolicyConfiguration": {"AdjustmentType": "ChangeInCapacity"}}
    with pytest.raises(UsageError) as err:
        check_restorable(snap(policies=[USER_POLICY, step]), OURS)
    assert "StepScaling policy 'cpu-steps'" in err.value.message and "\n" not in err.value.message
    check_restorable(snap(), OURS)


def test_the_snapshot_line_names_range_suspensions_policies_and_count():
    assert snap().describe() == ("endpoint/ranker/variant/AllTraffic: scalable target 1..4 "
                                 "(suspended: DynamicScalingIn); policy 'prod-invocations' TargetTracking "
                                 "SageMakerVariantInvocationsPerInstance 70, cooldowns out 120 s / in 600 s; "
                                 "1 instance")
    assert snap(target=None, policies=(), desired=2).describe() == ("endpoint/ranker/variant/AllTraffic: "
                                                                    "no scalable target; 2 instances")
    assert ScalingSnapshot.from_dict(json.loads(json.dumps(snap().as_dict()))) == snap()


# ---------------------------------------------------------------------------------------- on moto


@pytest.fixture
def aws(moto_url):
    """(application-autoscaling, sagemaker) clients on a reset moto server; the endpoint `ranker` (1 instance)."""
    urllib.request.urlopen(urllib.request.Request(f"{moto_url}/moto-api/reset", method="POST"), timeout=10).close()
    kw = {"endpoint_url": moto_url, "region_name": "us-east-1"}
    aas, sm = boto3.client("application-autoscaling", **kw), boto3.client("sagemaker", **kw)
    sm.create_model(ModelName="ranker", ExecutionRoleArn=ROLE,
                    PrimaryContainer={"Image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/r:1"})
    sm.create_endpoint_config(EndpointConfigName="ranker", ProductionVariants=[
        {"VariantName": "AllTraffic", "ModelName": "ranker", "InstanceType": "ml.c5.xlarge",
         "InitialInstanceCount": 1}])
    sm.create_endpoint(EndpointName="ranker", EndpointConfigName="ranker")
    return aas, sm


def calls_of(*clients) -> list[str]:
    """Every operation the clients send from now on, by API name."""
    seen: list[str] = []
    for client in clients:
        client.meta.events.register("before-call", lambda model, **_: seen.append(model.name))
    return seen


def user_setup(aas) -> None:
    aas.register_scalable_target(**REF.identity, MinCapacity=1, MaxCapacity=4,
                                 SuspendedState=USER_TARGET["SuspendedState"])
    aas.put_scaling_policy(**REF.identity, **USER_POLICY)


def fail_once(client, operation: str, exc: BaseException) -> None:
    """The client's first `operation` raises `exc` instead of reaching the server."""
    done: list[bool] = []

    def hook(model, **_):
        if model.name == operation and not done:
            done.append(True)
            raise exc

    client.meta.events.register("before-call", hook)


def comparable(s: ScalingSnapshot) -> dict:
    d = s.as_dict()
    d.pop("taken_at")
    return d


@pytest.mark.e2e
def test_a_full_cycle_puts_the_users_target_and_policy_back_exactly(aws, tmp_path):
    aas, sm = aws
    user_setup(aas)
    before = snapshot(aas, sm, REF)
    seen = calls_of(aas, sm)
    lines: list[str] = []
    with ScalingUnderTest(aas, sm, REF, Policy(), sweep_id="ranker-scaling", journal=journal_path(tmp_path, REF),
                          progress=lines.append, poll_s=0) as under_test:
        during = snapshot(aas, sm, REF)
        assert [p["PolicyName"] for p in during.policies] == [OURS]
        assert during.target == {"MinCapacity": 2, "MaxCapacity": 3, "SuspendedState": {
            "DynamicScalingInSuspended": False, "DynamicScalingOutSuspended": False, "ScheduledScalingSuspended": True}}
        assert (during.desired_instances, during.in_service_instances) == (2, 2)  # started from the minimum
        assert read_journal(under_test.journal)["state"] == "applied"
    assert comparable(snapshot(aas, sm, REF)) == comparable(before)
    assert read_journal(journal_path(tmp_path, REF))["state"] == "restored"
    mutating = [op for op in seen if not op.startswith(("Describe", "List"))]
    assert mutating == ["DeleteScalingPolicy", "RegisterScalableTarget", "UpdateEndpointWeightsAndCapacities",
                        "PutScalingPolicy",  # apply; then the restore:
                        "DeleteScalingPolicy", "RegisterScalableTarget", "PutScalingPolicy",
                        "UpdateEndpointWeightsAndCapacities"]
    assert any("before the test: endpoint/ranker/variant/AllTraffic: scalable target 1..4" in line for line in lines)


@pytest.mark.e2e
def test_a_variant_without_target_is_left_without_one_at_its_old_count(aws, tmp_path):
    aas, sm = aws
    with ScalingUnderTest(aas, sm, REF, Policy(min_instances=2, max_instances=4), sweep_id="s1",
                          journal=journal_path(tmp_path, REF), poll_s=0):
        sm.update_endpoint_weights_and_capacities(EndpointName="ranker", DesiredWeightsAndCapacities=[
            {"VariantName": "AllTraffic", "DesiredInstanceCount": 4}])  # what a scale-out does
    after = snapshot(aas, sm, REF)
    assert (after.target, after.policies, after.desired_instances) == (None, [], 1)
    assert aas.describe_scaling_policies(ServiceNamespace="sagemaker")["ScalingPolicies"] == []


@pytest.mark.e2e
def test_a_failed_apply_restores_and_names_the_api(aws, tmp_path):
    aas, sm = aws
    user_setup(aas)
    before = snapshot(aas, sm, REF)

    error = {"Error": {"Code": "LimitExceededException", "Message": "too many policies"}}
    fail_once(aas, "PutScalingPolicy", ClientError(error, "PutScalingPolicy"))
    under_test = ScalingUnderTest(aas, sm, REF, Policy(), sweep_id="s2", journal=journal_path(tmp_path, REF), poll_s=0)
    with pytest.raises(ScalingError) as err:
        under_test.apply()
    assert err.value.message == "PutScalingPolicy: LimitExceededException: too many policies"
    assert comparable(snapshot(aas, sm, REF)) == comparable(before)
    assert read_journal(journal_path(tmp_path, REF))["state"] == "restored"


@pytest.mark.e2e
def test_an_interrupted_apply_restores_before_the_interrupt_goes_on(aws, tmp_path):
    aas, sm = aws
    user_setup(aas)
    before = snapshot(aas, sm, REF)

    fail_once(sm, "UpdateEndpointWeightsAndCapacities", KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        ScalingUnderTest(aas, sm, REF, Policy(), sweep_id="s3", journal=journal_path(tmp_path, REF), poll_s=0).apply()
    assert comparable(snapshot(aas, sm, REF)) == comparable(before)


@pytest.mark.e2e
def test_another_process_finishes_the_restore_from_the_journal(aws, tmp_path):
    aas, sm = aws
    user_setup(aas)
    before = snapshot(aas, sm, REF)
    under_test = ScalingUnderTest(aas, sm, REF, Policy(), sweep_id="s4", journal=journal_path(tmp_path, REF), poll_s=0)
    under_test.apply()  # then "killed": never restored
    assert snapshot(aas, sm, REF).policy("sm-locust-s4") is not None
    lines: list[str] = []
    restored, left = finish_restores(tmp_path, aas=aas, sm=sm, progress=lines.append)
    assert (restored, left) == (["scaling of endpoint/ranker/variant/AllTraffic"], [])
    assert comparable(snapshot(aas, sm, REF)) == comparable(before)
    assert finish_restores(tmp_path, aas=aas, sm=sm) == ([], [])  # idempotent


@pytest.mark.e2e
def test_a_new_apply_first_finishes_an_unfinished_restore(aws, tmp_path):
    aas, sm = aws
    user_setup(aas)
    before = snapshot(aas, sm, REF)
    path = journal_path(tmp_path, REF)
    ScalingUnderTest(aas, sm, REF, Policy(), sweep_id="s5", journal=path, poll_s=0).apply()  # never restored
    second = ScalingUnderTest(aas, sm, REF, Policy(min_instances=1), sweep_id="s5", journal=path, poll_s=0)
    assert comparable(second.apply()) == comparable(before)  # its snapshot is the user's, not the first test's
    second.restore()
    assert comparable(snapshot(aas, sm, REF)) == comparable(before)


@pytest.mark.e2e
def test_cleanup_without_a_journal_deletes_the_sweeps_policy_on_any_variant(aws):
    aas, _sm = aws
    other = VariantRef("other", "blue")
    for ref in (REF, other):
        aas.register_scalable_target(**ref.identity, MinCapacity=1, MaxCapacity=2)
        aas.put_scaling_policy(**ref.identity, PolicyName="sm-locust-s6", PolicyType="TargetTrackingScaling",
                               TargetTrackingScalingPolicyConfiguration={"TargetValue": 5.0})
    aas.put_scaling_policy(**REF.identity, **USER_POLICY)
    deleted, left = delete_sweep_policies(aas, "s6")
    assert sorted(deleted) == ["scaling policy sm-locust-s6 on endpoint/other/variant/blue",
                               "scaling policy sm-locust-s6 on endpoint/ranker/variant/AllTraffic"] and left == []
    remaining = aas.describe_scaling_policies(ServiceNamespace="sagemaker")["ScalingPolicies"]
    assert [p["PolicyName"] for p in remaining] == ["prod-invocations"]


@pytest.mark.e2e
def test_a_missing_endpoint_or_variant_is_one_line(aws):
    aas, sm = aws
    with pytest.raises(UsageError, match="endpoint nope does not exist"):
        snapshot(aas, sm, VariantRef("nope"))
    with pytest.raises(UsageError, match=r"has no variant 'blue' \(its variants: AllTraffic\); set variant_name"):
        snapshot(aas, sm, VariantRef("ranker", "blue"))


@pytest.mark.e2e
def test_a_read_only_client_describes_but_refuses_changes(aws):
    aas, sm = aws
    aas, sm = read_only(aas), read_only(sm)
    user_setup_done = snapshot(aas, sm, REF)  # Describe* pass
    assert user_setup_done.target is None
    with pytest.raises(ReadOnlyViolation, match="RegisterScalableTarget refused"):
        aas.register_scalable_target(**REF.identity, MinCapacity=1, MaxCapacity=2)
    with pytest.raises(ReadOnlyViolation, match="UpdateEndpointWeightsAndCapacities refused"):
        sm.update_endpoint_weights_and_capacities(EndpointName="ranker", DesiredWeightsAndCapacities=[
            {"VariantName": "AllTraffic", "DesiredInstanceCount": 2}])


@pytest.mark.e2e
def test_the_poller_turns_describe_endpoint_into_the_instance_timeline(aws):
    _aas, sm = aws
    now = [1000.0]
    poller = InstancePoller(sm, REF, clock=lambda: now[0])
    poller.poll_once()
    sm.update_endpoint_weights_and_capacities(EndpointName="ranker", DesiredWeightsAndCapacities=[
        {"VariantName": "AllTraffic", "DesiredInstanceCount": 3}])
    now[0] += 10
    poller.poll_once()
    assert poller.timeline(RunClock(started_at=995.0)) == [InstanceSample(5.0, 1, 1), InstanceSample(15.0, 3, 3)]
    # against the emulation: run seconds are emulated ones; a reading before the run's start stands at 0
    assert poller.timeline(RunClock(started_at=1002.0, time_scale=30)) == [InstanceSample(0.0, 1, 1),
                                                                           InstanceSample(240.0, 3, 3)]
    sm.delete_endpoint(EndpointName="ranker")
    assert poller.poll_once() is None and poller.errors == 1 and "does not exist" in poller.last_error


@pytest.mark.e2e
def test_the_poller_says_a_change_when_it_reads_it_and_only_then(aws):
    _aas, sm = aws
    seen = []
    poller = InstancePoller(sm, REF, on_change=lambda before, now: seen.append((before.desired, now.desired)))
    poller.poll_once()
    poller.poll_once()
    assert seen == []  # the same counts twice: nothing to say
    sm.update_endpoint_weights_and_capacities(EndpointName="ranker", DesiredWeightsAndCapacities=[
        {"VariantName": "AllTraffic", "DesiredInstanceCount": 3}])
    poller.poll_once()
    poller.poll_once()
    assert seen == [(1, 3)]


@pytest.mark.e2e
def test_the_poller_thread_reads_at_start_every_period_and_at_stop(aws):
    _aas, sm = aws
    poller = InstancePoller(sm, REF, every_s=6, time_scale=30).start()  # 10 emulated s = 0.2 real s
    import time

    time.sleep(0.7)
    poller.stop()
    assert 4 <= len(poller.readings) <= 7  # at start, ~3 periods, at stop (a busy box may skip one)
    assert all(r.desired == 1 and r.in_service == 1 and r.status == "InService" for r in poller.readings)


def test_the_variants_own_policy_as_the_model_sees_it():
    assert snap().scaling_policy() == ScalingPolicy(1, 4, 70.0, "SageMakerVariantInvocationsPerInstance", 120.0, 600.0)
    assert snap(target=None).scaling_policy() is None  # no range: nothing to model
    custom = dict(USER_POLICY, TargetTrackingScalingPolicyConfiguration={
        "TargetValue": 50.0, "CustomizedMetricSpecification": {"MetricName": "CPUUtilization"}})
    assert snap(policies=[custom]).scaling_policy() is None
    assert snap(policies=[USER_POLICY, dict(USER_POLICY, PolicyName="second")]).scaling_policy() is None


class Updating:
    """The sagemaker client, but DescribeEndpoint says Updating the first `times` times (a scale-out under way)."""

    def __init__(self, sm, times: int):
        self.sm, self.times, self.seen = sm, times, 0

    def describe_endpoint(self, **kwargs):
        answer = self.sm.describe_endpoint(**kwargs)
        self.seen += 1
        return {**answer, "EndpointStatus": "Updating"} if self.seen <= self.times else answer

    def __getattr__(self, name):
        return getattr(self.sm, name)


@pytest.mark.e2e
def test_a_cancelled_test_still_restores_waiting_out_a_scale_out(aws, tmp_path):
    aas, sm = aws
    user_setup(aas)
    before = snapshot(aas, sm, REF)
    cancel = threading.Event()
    lines: list[str] = []
    under_test = ScalingUnderTest(aas, sm, REF, Policy(), sweep_id="s7", journal=journal_path(tmp_path, REF), poll_s=0,
                                  cancel=cancel, progress=lines.append)
    under_test.apply()
    cancel.set()  # Ctrl-C: the runner cancels what is under way, then tears down
    under_test.sm = Updating(sm, times=4)
    assert under_test.restore() == []
    assert comparable(snapshot(aas, sm, REF)) == comparable(before)
    assert "ranker Updating, 2 instances in service: waiting" in lines
