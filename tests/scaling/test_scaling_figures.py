"""Autoscaling figures from timelines (sm_locust/scaling/figures.py), the model run over a traffic
pattern (simulate.py) and the traffic phases (plateau/rates.py), on synthetic data."""

from __future__ import annotations

import pytest

from sm_locust.errors import UsageError
from sm_locust.measure.timeline import Second
from sm_locust.plateau.rates import parse_traffic
from sm_locust.scaling.figures import (
    alarm_start,
    autoscaling_figures,
    breach_cause,
    count_flaps,
    describe_change,
    instance_hours,
    metric_periods,
    period_origin,
    scale_events,
)
from sm_locust.scaling.policy import ScalingPolicy
from sm_locust.scaling.simulate import instance_timeline, simulate
from sm_locust.scaling.timeline import InstanceSample, MetricPeriod, RunClock, compact

EXAMPLE = [{"duration_s": 300, "rps": 20}, {"duration_s": 600, "rps": 150}, {"duration_s": 300, "rps": 20}]
T0 = 1_700_000_000.0


def example_policy(min_instances=1, **overrides):
    settings = dict(min_instances=min_instances, max_instances=3, target_value=4200, scale_out_cooldown_s=60,
                    scale_in_cooldown_s=300)
    settings.update(overrides)
    return ScalingPolicy(**settings).check()


def seconds_at(rates_and_p95, time_scale=1.0, start=T0):
    """One Second per real second: (sent per second, latency ms of every request that second)."""
    out = []
    for i, (sent, latency_ms) in enumerate(rates_and_p95):
        out.append(Second(t=start + (i + 1) / 1.0, users=0, spawning=False, requests=sent, failures=0,
                          hist={int(latency_ms): sent} if sent else {}, sent=sent))
    return out


def test_the_issue_example_scales_one_to_three_after_three_minutes():
    sim = simulate(example_policy(), parse_traffic(EXAMPLE), instance_start_s=240)
    [d] = sim.decisions
    assert (d.t_s, d.from_count, d.to_count, d.reaction_s, d.ready_s) == (480.0, 1, 3, 180.0, 720.0)
    assert sim.instances == [InstanceSample(0, 1, 1), InstanceSample(480, 3, 1), InstanceSample(720, 3, 3)]
    assert [p.value for p in sim.periods[4:7]] == [1200.0, 9000.0, 9000.0]  # 20 and 150 req/s x 60 per instance


def test_a_minimum_that_covers_the_peak_still_scales_to_the_target():
    sim = simulate(example_policy(min_instances=2), parse_traffic(EXAMPLE), instance_start_s=240)
    assert [(d.from_count, d.to_count) for d in sim.decisions] == [(2, 3)]  # 4500/min each > 4200


def test_concurrency_metric_simulation_follows_littles_law_then_the_backlog():
    policy = example_policy(metric="ConcurrentRequestsPerModel", target_value=2)
    sim = simulate(policy, parse_traffic([{"duration_s": 60, "rps": 20}, {"duration_s": 60, "rps": 150}]),
                   instance_start_s=60, service_s=0.04, slots=4)
    assert sim.periods[0].value == pytest.approx(0.8)  # 20 req/s x 40 ms
    assert sim.periods[7].value > 4  # 150 req/s on 100 req/s: every slot busy and a queue
    assert sim.decisions[0].t_s == 90.0  # three 10-s periods above 2 from 60 s


def test_instance_timeline_steps():
    sim = simulate(example_policy(), parse_traffic(EXAMPLE), instance_start_s=240)
    assert instance_timeline(1, sim.decisions) == sim.instances


def test_scale_events_from_a_polled_timeline_measure_reaction_and_ready_from_the_first_breach():
    policy = example_policy()
    periods = [MetricPeriod(60 * i, 9000 if 5 <= i < 12 else 1200) for i in range(20)]
    polled = [InstanceSample(t, 1, 1) for t in range(0, 490, 10)] + [InstanceSample(490, 3, 1)] + \
             [InstanceSample(t, 3, 1) for t in range(500, 730, 10)] + [InstanceSample(730, 3, 3)]
    [event] = scale_events(polled, policy=policy, periods=periods)
    assert event == {"t_s": 490, "direction": "out", "from": 1, "to": 3, "reaction_s": 190, "ready_s": 430,
                     "ready_at_s": 730}


def test_a_scale_in_is_timed_from_the_first_period_below_ninety_percent():
    policy = example_policy(min_instances=1)
    periods = [MetricPeriod(60 * i, 9000 if i < 3 else 1000) for i in range(25)]  # below 3780 from 180 s
    steps = [InstanceSample(0, 3, 3), InstanceSample(1080, 1, 1)]
    [event] = scale_events(steps, policy=policy, periods=periods)
    assert (event["direction"], event["reaction_s"], event["ready_s"]) == ("in", 900, 900)  # 15 periods, at once


def test_a_late_alarm_still_finds_its_breach():
    periods = [MetricPeriod(0, 100), MetricPeriod(60, 9000), MetricPeriod(120, 9000), MetricPeriod(180, 9000),
               MetricPeriod(240, 100)]
    policy = example_policy()
    assert alarm_start(periods, 330.0, lambda v: v > policy.target_value, 60.0) == 60.0
    assert alarm_start(periods, 330.0, lambda v: v > policy.target_value, 60.0, after_s=120.0) == 120.0
    assert alarm_start(periods[:1], 60.0, lambda v: v > policy.target_value, 60.0) is None


def test_without_a_policy_events_have_no_reaction():
    [event] = scale_events([InstanceSample(0, 1, 1), InstanceSample(100, 2, 1), InstanceSample(300, 2, 2)])
    assert event["reaction_s"] is None and event["ready_s"] is None and event["ready_at_s"] == 300


def test_flaps_count_a_scale_in_followed_by_a_scale_out_within_ten_minutes():
    events = [{"t_s": 0, "direction": "out"}, {"t_s": 900, "direction": "in"}, {"t_s": 1400, "direction": "out"},
              {"t_s": 2000, "direction": "in"}, {"t_s": 2700, "direction": "out"}]
    assert count_flaps(events) == 1  # 900 -> 1400 (500 s); 2000 -> 2700 is 700 s


def test_instance_hours_bill_starting_instances():
    steps = [InstanceSample(0, 1, 1), InstanceSample(480, 3, 1), InstanceSample(720, 3, 3)]
    assert instance_hours(steps, 1200) == pytest.approx((480 * 1 + 720 * 3) / 3600)


def test_compact_keeps_the_changes():
    polled = [InstanceSample(0, 1, 1), InstanceSample(10, 1, 1), InstanceSample(20, 2, 1), InstanceSample(30, 2, 1)]
    assert compact(polled) == [InstanceSample(0, 1, 1), InstanceSample(20, 2, 1)]


def test_metric_periods_from_the_clients_sends_in_emulated_minutes():
    # 40 real seconds at time scale 30 = 1200 emulated seconds; 2 real seconds per emulated minute.
    clock = RunClock(T0, 30.0)
    secs = seconds_at([(20, 30)] * 10 + [(150, 30)] * 20 + [(20, 30)] * 10)
    instances = [InstanceSample(0, 1, 1), InstanceSample(480, 3, 1), InstanceSample(720, 3, 3)]
    periods = metric_periods(secs, instances, example_policy(), clock)
    assert len(periods) == 20
    assert periods[0].value == pytest.approx(1200)  # 20 req/s x 60 on one instance, per emulated minute
    assert periods[5].value == pytest.approx(9000)
    assert periods[12].value == pytest.approx(3000)  # three instances from 720 s


def test_periods_lie_on_the_metrics_own_grid():
    assert period_origin(RunClock(T0, 1.0), 60.0) == 40.0  # CloudWatch minutes: T0 is 20 s past one
    emulator_started = T0 - 3.0  # 3 real s before the run, x30: emulated second -90 is a boundary
    assert period_origin(RunClock(T0, 30.0), 60.0, emulator_started) == 30.0
    secs = seconds_at([(20, 30)] * 4)  # 4 real s = 120 emulated s, from run second 0
    periods = metric_periods(secs, [InstanceSample(0, 1, 1)], example_policy(), RunClock(T0, 30.0), None,
                             emulator_started)
    assert [p.t_s for p in periods] == [-30.0, 30.0, 90.0]  # the partial periods at both ends included


def test_figures_of_an_emulated_run():
    clock_scale = 30.0
    latencies = [30] * 10 + [30] * 4 + [900] * 12 + [30] * 14  # breached for 12 real seconds = 360 s
    secs = seconds_at([(20 if i < 10 or i >= 30 else 150, lat) for i, lat in enumerate(latencies)])
    instances = [InstanceSample(0, 1, 1), InstanceSample(480, 3, 1), InstanceSample(720, 3, 3)]
    fig = autoscaling_figures(instances, secs, started_at=T0, policy=example_policy(), slo_ms=250, percentile=95,
                              price_per_hour=0.23, failures={"ThrottlingException": 3, "ModelError": 2},
                              time_scale=clock_scale, source="emulator")
    assert fig["duration_s"] == 1200
    # readings only at 0, 480 and 720 s: the change is known to 480 s, its arrival in service to 240 s
    assert fig["scale_events"] == [{"t_s": 480, "direction": "out", "from": 1, "to": 3, "reaction_s": 180.0,
                                    "ready_s": 420.0, "ready_at_s": 720, "reaction_s_ci95": [0.0, 180.0],
                                    "ready_s_ci95": [180.0, 420.0]}]
    assert fig["slo_breach_s"] == pytest.approx(360)
    assert fig["breach_s_ci95"] == [pytest.approx(360), pytest.approx(360)]  # 900 ms vs 250: no second can flip
    assert fig["breach_client_bound_s"] == 0.0
    assert fig["breaches"] == [[pytest.approx(420), pytest.approx(780)]]
    assert fig["peak_instances"] == 3
    assert fig["instance_hours"] == pytest.approx((480 + 720 * 3) / 3600)
    assert fig["cost_usd"] == pytest.approx(fig["instance_hours"] * 0.23)
    assert (fig["throttled"], fig["failed"], fig["flaps"]) == (3, 2, 0)
    assert breach_cause(fig) == "360 s over the SLO while 2 instances started"


def test_figures_without_an_slo_or_price_leave_them_empty():
    fig = autoscaling_figures([InstanceSample(0, 2, 2)], seconds_at([(5, 10)] * 3), started_at=T0)
    assert fig["slo_breach_s"] is None and fig["cost_usd"] is None and fig["scale_events"] == []
    assert breach_cause(fig) is None


@pytest.mark.parametrize("data, message", [
    ([], "traffic is empty"),
    ({"phases": []}, "traffic.phases is empty"),
    ([{"duration_s": 300}], "traffic[0] needs rps"),
    ([{"duration_s": 0, "rps": 5}], "traffic[0].duration_s must be above 0"),
    ([{"duration_s": 10, "rps": -1}], "traffic[0].rps must be at least 0"),
    ([{"duration_s": 10, "rps": 0}], "every phase sends 0 req/s"),
    ([{"duration_s": 10, "rps": 5, "users": 3}], "traffic[0]: unknown key 'users'"),
    ("fast", "traffic must be a list of phases"),
])
def test_bad_traffic_is_a_one_line_usage_error(data, message):
    with pytest.raises(UsageError) as info:
        parse_traffic(data)
    assert message in str(info.value)


def test_each_rate_token_carries_what_divides_every_phase():
    assert parse_traffic(EXAMPLE).token_rate() == 10  # 2, 15, 2 tokens: no ramp between phases
    assert parse_traffic([{"duration_s": 5, "rps": 7}, {"duration_s": 5, "rps": 150}]).token_rate() == 1
    assert parse_traffic([{"duration_s": 5, "rps": 40}]).token_rate() == 2  # 20 tokens, not 4


def test_traffic_phases_answer_the_rate_at_a_run_second():
    traffic = parse_traffic({"phases": EXAMPLE})
    assert traffic.duration_s == 1200 and traffic.peak_rps == 150
    assert [traffic.rate_at(t) for t in (0, 299.9, 300, 899, 900, 1199)] == [20, 20, 150, 150, 20, 20]
    assert traffic.rate_at(1200) is None and traffic.phase_at(450) == 1


def test_live_scale_lines_say_what_a_reading_shows_and_nothing_when_it_did_not_move():
    assert describe_change(1, 1, 1, 1) is None
    assert describe_change(1, 1, 3, 1) == "scale out under way: desired 1 -> 3, 1 in service"
    assert describe_change(3, 1, 3, 2) == "scale under way: 2 of 3 instances in service"
    assert describe_change(3, 2, 3, 3) == "scale done: 3 instances in service"
    assert describe_change(3, 3, 2, 3) == "scale in under way: desired 3 -> 2, 3 in service"
    assert describe_change(2, 3, 2, 2) == "scale done: 2 instances in service"
    assert describe_change(1, 1, 3, 3) == "scale out done: 1 -> 3 instances in service"  # read after it finished
    assert describe_change(1, 1, None, None) is None  # a reading without counts says nothing
