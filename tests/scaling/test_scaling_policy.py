"""The target-tracking control loop (sm_locust/scaling/policy.py) on synthetic metric series.

Each test feeds datapoints one period at a time, as CloudWatch would, and checks the decision a user
would see on SageMaker: when the desired count changes, to what, and why not earlier.
"""

from __future__ import annotations

import pytest

from sm_locust.errors import UsageError
from sm_locust.scaling.policy import CONCURRENCY, INVOCATIONS, ScalingPolicy, TargetTracking

TARGET = 4200.0


def policy(**overrides) -> ScalingPolicy:
    settings = dict(min_instances=1, max_instances=10, target_value=TARGET, scale_out_cooldown_s=0.0,
                    scale_in_cooldown_s=0.0)
    settings.update(overrides)
    return ScalingPolicy(**settings).check()


def feed(loop: TargetTracking, values, start_s: float = 0.0, in_service=None):
    """Datapoints for consecutive periods from `start_s`; the decisions taken, with their period index."""
    period = loop.spec.period_s
    out = []
    for i, value in enumerate(values):
        decision = loop.observe(start_s + i * period, value, in_service)
        if decision is not None:
            out.append((i, decision))
    return out


def test_scale_out_after_three_periods_above_target_to_the_proportional_count():
    loop = TargetTracking(policy(), initial=1)
    decisions = feed(loop, [1200] * 5 + [9000] * 3)
    assert len(decisions) == 1
    index, d = decisions[0]
    assert index == 7  # the third period above the target completes the alarm
    assert (d.direction, d.from_count, d.to_count) == ("out", 1, 3)  # ceil(1 x 9000 / 4200) = 3
    assert d.t_s == 480.0 and d.alarm_start_s == 300.0 and d.reaction_s == 180.0


def test_two_periods_above_target_then_one_below_do_not_scale():
    loop = TargetTracking(policy(), initial=1)
    assert feed(loop, [9000, 9000, 4000, 9000, 9000]) == []
    assert loop.desired == 1


def test_a_period_without_data_breaks_the_streak():
    loop = TargetTracking(policy(), initial=1)
    assert feed(loop, [9000, 9000, None, 9000, 9000]) == []


def test_exactly_at_target_is_not_above_it():
    loop = TargetTracking(policy(), initial=2)
    assert feed(loop, [TARGET] * 20) == []


@pytest.mark.parametrize("current, value, expected", [
    (1, 4201, 2), (1, 8400, 2), (1, 8401, 3), (2, 6300, 3), (3, 9000, 7), (4, 4300, 5),
])
def test_desired_count_is_ceil_of_capacity_times_metric_over_target(current, value, expected):
    loop = TargetTracking(policy(min_instances=1), initial=current)
    [(_, d)] = feed(loop, [value] * 3)
    assert d.to_count == expected


def test_the_count_is_clamped_to_the_maximum():
    loop = TargetTracking(policy(max_instances=3), initial=1)
    [(_, d)] = feed(loop, [42000] * 3)
    assert d.to_count == 3
    assert feed(loop, [42000] * 10, start_s=180) == []  # at the maximum: nothing more to do


def test_initial_count_below_the_minimum_is_raised_at_once():
    loop = TargetTracking(policy(min_instances=2), initial=1, activity_s=240)
    [d] = loop.decisions
    assert (d.t_s, d.from_count, d.to_count, d.ready_s) == (0.0, 1, 2, 240.0)


def test_scale_in_after_fifteen_periods_below_ninety_percent_of_target():
    loop = TargetTracking(policy(min_instances=1), initial=4)
    low = 0.5 * TARGET  # 2100 per instance on 4 instances = 8400/min in all: 2 instances
    decisions = feed(loop, [low] * 15)
    [(index, d)] = decisions
    assert index == 14  # the fifteenth period below completes the scale-in alarm
    assert (d.direction, d.from_count, d.to_count) == ("in", 4, 2)
    assert d.alarm_start_s == 0.0 and d.t_s == 900.0


def test_between_ninety_and_hundred_percent_of_target_nothing_scales_in():
    loop = TargetTracking(policy(), initial=4)
    assert feed(loop, [0.91 * TARGET] * 40) == []
    loop = TargetTracking(policy(), initial=4)
    assert feed(loop, [0.89 * TARGET] * 15) == []  # below 90 %, but ceil(4 x 0.89) = 4: no instance to spare
    loop = TargetTracking(policy(), initial=4)
    assert feed(loop, [0.70 * TARGET] * 15)[0][1].to_count == 3


def test_scale_in_stops_at_the_minimum():
    loop = TargetTracking(policy(min_instances=2), initial=4)
    [(_, d)] = feed(loop, [100] * 15)
    assert d.to_count == 2


def test_a_running_scale_out_cooldown_delays_a_scale_out_that_adds_nothing_new():
    # out-cooldown 300 s after the first scale-out (whose activity lasts 0 s here): the metric stays
    # high (measured with the 1 old instance), but counted with the instances the datapoint saw, the
    # proposal (3) is no more than the desired count: nothing until the cooldown ends.
    loop = TargetTracking(policy(scale_out_cooldown_s=300), initial=1)
    first = feed(loop, [9000] * 3, in_service=1)
    assert [d.to_count for _, d in first] == [3]
    more = feed(loop, [9000] * 4, start_s=180, in_service=1)
    assert more == []  # 240..420 s: inside the cooldown (until 480 s)
    [(index, d)] = feed(loop, [9000], start_s=420, in_service=1)
    assert d.t_s == 480.0 and d.to_count == 7  # cooldown over: ceil(3 x 9000 / 4200) from the desired count
    assert d.alarm_start_s == 180.0  # counted from the first breaching period after the previous change


def test_a_larger_scale_out_during_the_cooldown_goes_through():
    loop = TargetTracking(policy(scale_out_cooldown_s=600), initial=1)
    feed(loop, [9000] * 3, in_service=1)
    [(_, d)] = feed(loop, [16800], start_s=180, in_service=1)  # 1 x 16800 / 4200 = 4 > 3
    assert (d.t_s, d.from_count, d.to_count) == (240.0, 3, 4)


def test_reaction_waits_three_periods_plus_a_running_cooldown():
    # A scale-in at 900 s starts a scale-in cooldown, which never holds a scale-out back; a scale-out
    # at 180 s whose instances take 240 s and a 300 s cooldown hold the next one until 720 s.
    loop = TargetTracking(policy(scale_out_cooldown_s=300), initial=1, activity_s=240)
    feed(loop, [9000] * 3, in_service=1)  # out 1 -> 3 at 180 s, serving at 420 s, cooldown until 720 s
    later = feed(loop, [20000] * 12, start_s=180, in_service=3)  # 3 x 20000 / 4200 -> 15: larger, but...
    [(index, d)] = later[:1]
    assert d.t_s == 420.0  # ...the activity (instances starting: endpoint Updating) blocks until 420 s
    assert d.to_count == 10  # clamped to the maximum


def test_a_scale_out_during_a_scale_in_cooldown_happens_at_once():
    loop = TargetTracking(policy(scale_in_cooldown_s=3600), initial=4)
    [(_, d_in)] = feed(loop, [1000] * 15)
    assert d_in.direction == "in" and d_in.t_s == 900.0
    [(index, d_out)] = feed(loop, [9000] * 3, start_s=900)
    assert d_out.direction == "out" and d_out.t_s == 1080.0  # three periods, no waiting for the hour


def test_a_scale_in_cooldown_blocks_the_next_scale_in():
    loop = TargetTracking(policy(scale_in_cooldown_s=300, min_instances=1), initial=8)
    decisions = feed(loop, [2000] * 25)
    times = [d.t_s for _, d in decisions]
    assert times[0] == 900.0 and times[1] == 1200.0  # 300 s apart, the low alarm still holding


def test_flapping_traffic_scales_in_then_out_again():
    loop = TargetTracking(policy(scale_in_cooldown_s=0), initial=3)
    decisions = feed(loop, [2000] * 15 + [9000] * 3)
    assert [d.direction for _, d in decisions] == ["in", "out"]


def test_high_resolution_concurrency_metric_uses_ten_second_periods():
    loop = TargetTracking(policy(metric="ConcurrentRequestsPerModel", target_value=5), initial=1)
    assert loop.spec.name == CONCURRENCY and loop.spec.period_s == 10.0
    [(index, d)] = feed(loop, [12] * 3)
    assert d.t_s == 30.0 and d.to_count == 3  # 30 s to react instead of 3 minutes
    loop = TargetTracking(policy(metric=CONCURRENCY, target_value=5), initial=4)
    [(index, d)] = feed(loop, [1.0] * 90)  # scale-in as slow as the standard metric: 15 minutes
    assert d.t_s == 900.0


@pytest.mark.parametrize("overrides, message", [
    (dict(min_instances=3, max_instances=2), "autoscaling.min_instances (3) is above autoscaling.max_instances (2)"),
    (dict(target_value=0), "autoscaling.target_value must be a number above 0"),
    (dict(target_value=-5), "autoscaling.target_value must be a number above 0"),
    (dict(metric="CPUUtilization"), "autoscaling.metric: unknown scaling metric 'CPUUtilization'; choose one of"),
    (dict(min_instances=0), "autoscaling.min_instances must be a whole number of instances, at least 1"),
    (dict(scale_in_cooldown_s=-1), "autoscaling.scale_in_cooldown_s must be a number of seconds"),
])
def test_bad_policies_are_one_line_usage_errors(overrides, message):
    settings = dict(min_instances=1, max_instances=3, target_value=TARGET)
    settings.update(overrides)
    with pytest.raises(UsageError) as info:
        ScalingPolicy(**settings).check()
    assert message in str(info.value) and "\n" not in str(info.value)


def test_metric_names_are_spelled_as_aws_does():
    assert ScalingPolicy(1, 2, 10, metric="invocationsperinstance").check().metric == INVOCATIONS
    assert ScalingPolicy(1, 2, 10).check().scale_out_cooldown_s == 300.0  # AWS's default for variants
