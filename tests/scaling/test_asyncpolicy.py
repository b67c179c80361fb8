"""Backlog-based autoscaling of an async endpoint on synthetic backlog series: target tracking on
ApproximateBacklogSizePerInstance scales out on a deep backlog and in to zero when it empties, but
from zero only once the backlog exceeds its target; the step policy on HasBacklogWithoutCapacity
scales up from zero after 2 periods of any backlog; together the larger count wins."""

from __future__ import annotations

import pytest

from sm_locust.errors import UsageError
from sm_locust.scaling.asyncpolicy import (
    AsyncAutoscaler,
    BacklogPolicy,
    InstanceClock,
    StepFromZero,
    backlog_per_instance,
    has_backlog_without_capacity,
)
from sm_locust.scaling.policy import IN, OUT

TRACK = BacklogPolicy(0, 4, 5.0, scale_out_cooldown_s=300, scale_in_cooldown_s=300)


def feed(scaler: AsyncAutoscaler, backlogs: list[float], start: int = 0) -> list[tuple[float, str, int, int]]:
    """One datapoint per minute; in service = desired once the decision's activity ended."""
    out = []
    ready: list[tuple[float, int]] = []
    in_service = scaler.desired
    for i, backlog in enumerate(backlogs):
        t = (start + i) * 60.0
        for when, count in list(ready):
            if when <= t:
                in_service = count
                ready.remove((when, count))
        decision = scaler.observe(t, backlog, in_service)
        if decision is not None:
            out.append((decision.t_s, decision.direction, decision.from_count, decision.to_count))
            if decision.direction == OUT:
                ready.append((decision.ready_s, decision.to_count))
            else:
                in_service = decision.to_count
    return out


def test_the_metrics_of_an_empty_fleet():
    assert backlog_per_instance(12, 3) == 4 and backlog_per_instance(12, 0) == 12
    assert has_backlog_without_capacity(1, 0) == 1.0
    assert has_backlog_without_capacity(0, 0) == 0.0 and has_backlog_without_capacity(5, 1) == 0.0


def test_target_tracking_scales_out_on_a_deep_backlog_and_in_to_zero_when_it_empties():
    scaler = AsyncAutoscaler(1, tracking=TRACK, activity_s=120)
    events = feed(scaler, [20.0] * 4 + [0.0] * 40)
    first = events[0]
    assert first[1:] == (OUT, 1, 4)  # ceil(1 x 20 / 5), within the max
    assert first[0] == 180.0  # 3 one-minute datapoints above the target
    assert events[-1][1:] == (IN, 4, 0) and scaler.desired == 0  # MinCapacity 0: scaled in to zero
    assert all(e[1] == IN for e in events[1:])


def test_from_zero_target_tracking_waits_for_the_backlog_to_exceed_its_target():
    scaler = AsyncAutoscaler(0, tracking=TRACK, activity_s=120)
    assert feed(scaler, [3.0] * 30) == []  # 3 queued requests never exceed 5 per instance: they wait
    deep = AsyncAutoscaler(0, tracking=TRACK, activity_s=120)
    assert feed(deep, [6.0] * 5)[0][1:] == (OUT, 0, 2)  # ceil(6 / 5): counted as if one instance held them


def test_the_step_policy_scales_up_from_zero_after_two_periods_of_any_backlog():
    scaler = AsyncAutoscaler(0, tracking=TRACK, from_zero=StepFromZero(4), activity_s=120)
    events = feed(scaler, [1.0] * 6)
    assert events[0] == (120.0, OUT, 0, 1)  # the second minute with a backlog and no instance
    assert len(events) == 1  # serving from 240 s: no backlog without capacity since, and 1 < 5 per instance
    alone = AsyncAutoscaler(0, from_zero=StepFromZero(4, cooldown_s=300), activity_s=600)
    steps = feed(alone, [1.0] * 12)  # the instance takes 10 minutes: each cooldown's end adds one more
    assert [e[3] for e in steps] == [1, 2, 3] and [e[0] for e in steps] == [120.0, 420.0, 720.0]


def test_the_step_policy_ignores_missing_data_and_a_fleet_at_its_maximum():
    policy = StepFromZero(1)
    assert policy.observe(0, 1.0, 0) is None and policy.observe(60, None, 0) is None
    assert policy.observe(120, 1.0, 0) == 1  # missing data broke nothing
    assert StepFromZero(1).observe(0, 1.0, 1) is None


def test_both_policies_the_larger_count_wins():
    both = AsyncAutoscaler(0, tracking=TRACK, from_zero=StepFromZero(4), activity_s=0)
    events = feed(both, [30.0] * 5)
    assert events[0] == (120.0, OUT, 0, 1)  # the step first: 2 periods
    assert events[1][1] == OUT and events[1][3] == 4  # then tracking: 30 per instance over 5, at most 4


def test_a_policy_is_needed_and_checked():
    with pytest.raises(ValueError):
        AsyncAutoscaler(1)
    with pytest.raises(UsageError, match="min_instances"):
        BacklogPolicy(-1, 2, 5.0).check()
    with pytest.raises(UsageError, match="above max_instances"):
        BacklogPolicy(3, 2, 5.0).check()
    with pytest.raises(UsageError, match="above 0"):
        BacklogPolicy(0, 2, 0.0).check()
    assert BacklogPolicy(0, 2, 5.0).check().min_instances == 0


def test_instance_seconds_add_up_what_served():
    clock = InstanceClock()
    clock.at(0, 0)
    clock.at(240, 1)
    clock.at(600, 2)
    clock.at(900, 0)
    assert clock.total(1200) == 1 * 360 + 2 * 300
    clock.at(1000, 1)
    assert clock.total(1100) == 1 * 360 + 2 * 300 + 100
