"""The autoscaling figures' intervals (pure, synthetic timelines): reaction and ready times bounded by
the poll's resolution, seconds over the SLO resampled per second, and the seconds over the SLO the
client caused."""

from __future__ import annotations

from sm_locust.measure.timeline import Second
from sm_locust.scaling.figures import autoscaling_figures
from sm_locust.scaling.intervals import (
    breach_client_bound_s,
    breach_interval,
    client_behind,
    client_caused,
    drained_by,
    reading_gap,
    with_event_intervals,
)
from sm_locust.scaling.policy import ScalingPolicy
from sm_locust.scaling.timeline import InstanceSample, RunClock

CLOCK = RunClock(1000.0, 30.0)  # one real second is 30 run seconds, as on the local fleet


def readings(*counts: tuple[float, int, int]) -> list[InstanceSample]:
    return [InstanceSample(t, d, s) for t, d, s in counts]


def second(t: float, hist: dict[int, int], **kw) -> Second:
    return Second(t=t, users=2, spawning=False, requests=sum(hist.values()), failures=0, hist=hist, **kw)


def test_a_change_is_known_to_the_gap_since_the_reading_before():
    polled = readings((0, 1, 1), (10, 1, 1), (20, 1, 1), (30, 3, 1), (40, 3, 1), (250, 3, 3))
    assert reading_gap(polled, 30) == 10 and reading_gap(polled, 250) == 210 and reading_gap(polled, 0) is None
    events = [{"t_s": 30.0, "direction": "out", "reaction_s": 25.0, "ready_s": 240.0, "ready_at_s": 250.0},
              {"t_s": 0.0, "direction": "in", "reaction_s": None, "ready_s": None, "ready_at_s": None}]
    out = with_event_intervals(events, polled)
    assert out[0]["reaction_s_ci95"] == [15.0, 25.0]  # seen at 30 s, not at 20 s: 10 s of resolution
    assert out[0]["ready_s_ci95"] == [30.0, 240.0]  # a reading failed for 210 s: the bound says so
    assert out[1]["reaction_s_ci95"] is None and out[1]["ready_s_ci95"] is None
    assert out[0]["reaction_s"] == 25.0  # the figure itself is unchanged


def test_seconds_that_cannot_flip_are_certain_and_near_ones_widen_the_interval():
    far_over = [second(1000.0 + i, {400: 30}) for i in range(1, 4)]  # 3 real seconds, all slower than the SLO
    far_under = [second(1004.0 + i, {40: 30}) for i in range(3)]
    assert breach_interval(far_over + far_under, CLOCK, 250.0, 95.0) == [90.0, 90.0]
    near = [second(1010.0, {240: 27, 260: 3})]  # p95 reads 260 (over) or 240 (under) on a redraw
    low, high = breach_interval(far_over + near, CLOCK, 250.0, 95.0)
    assert low == 90.0 and high == 120.0
    assert breach_interval([], CLOCK, 250.0, 95.0) is None


def test_the_seconds_over_the_slo_the_client_caused():
    late = second(1001.0, {400: 30}, sent=30, late=6)  # 20 % of its sends late
    cpu = second(1002.0, {400: 30}, client_cpu_pct=95.0)
    fine = second(1003.0, {400: 30}, sent=30, late=1, client_cpu_pct=40.0, client_wait_pct=5.0)
    under = second(1004.0, {40: 30}, sent=30, late=30)  # behind, but not over the SLO
    starved = second(1005.0, {400: 30}, client_cpu_pct=40.0, client_wait_pct=55.0)  # running or waiting: 95 %
    assert [client_behind(s) for s in (late, cpu, fine, under, starved)] == [True, True, False, True, True]
    assert breach_client_bound_s([late, cpu, fine, under, starved], CLOCK, 250.0, 95.0) == 90.0


def test_the_figures_block_carries_them():
    policy = ScalingPolicy(target_value=100.0, min_instances=1, max_instances=3)
    polled = readings((0, 1, 1), (30, 1, 1), (60, 3, 1), (300, 3, 3))
    seconds = [second(1000.0 + i, {400 if 2 <= i <= 5 else 40: 50}, sent=50, late=0) for i in range(1, 12)]
    figures = autoscaling_figures(polled, seconds, started_at=1000.0, policy=policy, slo_ms=250.0, time_scale=30.0)
    assert figures["slo_breach_s"] == 120.0 and figures["breach_s_ci95"] == [120.0, 120.0]
    assert figures["breach_client_bound_s"] == 0.0
    event = figures["scale_events"][0]
    assert (event["reaction_s"], event["ready_s"]) == (60.0, 300.0)  # the metric breached from run second 0
    assert event["reaction_s_ci95"] == [30.0, 60.0] and event["ready_s_ci95"] == [60.0, 300.0]
    assert figures["reaction_s_ci95"] == event["reaction_s_ci95"]


def test_a_late_burst_owns_the_seconds_its_queue_takes_to_drain_not_an_overload():
    """Issue 28's flip: 47 sends late in one second, then seconds over the SLO while the endpoint (with
    room to spare) drains them. An endpoint over its capacity never drains: its breach is its own."""
    rates = [(150, 150, 0, 50), (146, 81, 47, 520), (155, 174, 3, 560), (153, 172, 0, 420), (150, 160, 11, 290),
             (151, 162, 0, 200), (150, 150, 0, 60)]  # (sent, completed, late, p95 ms) per second
    burst = [second(1001.0 + i, {p95: done}, sent=sent, late=late) for i, (sent, done, late, p95) in enumerate(rates)]
    assert drained_by(burst, 1) == 5  # 65, 46, 27, 17, then 6 <= 10 % of 151
    assert client_caused(burst) == {1, 2, 3, 4, 5}
    assert breach_client_bound_s(burst, CLOCK, 250.0, 95.0) == 4 * 30.0  # all four seconds over the SLO
    overload = [second(1001.0 + i, {900: 100}, sent=150, late=30 if i == 0 else 0) for i in range(8)]
    assert drained_by(overload, 0) is None  # 50 more a second: never drains within 5 s
    assert client_caused(overload) == {0}
    assert breach_client_bound_s(overload, CLOCK, 250.0, 95.0) == 30.0
    closed = [second(1001.0, {900: 10}, client_cpu_pct=95.0)]
    assert drained_by(closed, 0) is None and client_caused(closed) == {0}  # no sends counted: the second alone


def test_a_run_without_any_instance_reading_still_has_figures():
    """An endpoint that stopped answering DescribeEndpoint (killed) left no reading: the figures say so
    (no instance-hours, no events) instead of failing the sweep that runs it."""
    seconds = [second(1000.0 + i, {900: 10}) for i in range(1, 4)]
    figures = autoscaling_figures([], seconds, started_at=1000.0, policy=ScalingPolicy(target_value=100.0,
                                                                                     max_instances=3),
                                  slo_ms=250.0, time_scale=30.0)
    assert figures["instance_hours"] == 0.0 and figures["scale_events"] == [] and figures["reaction_s_ci95"] is None
    assert figures["slo_breach_s"] == 90.0 and figures["breach_s_ci95"] == [90.0, 90.0]


def test_a_second_over_the_slo_by_less_than_the_client_waited_for_a_cpu_may_be_the_clients():
    """p95 330 ms against 250 while the client waited 356 ms for a CPU: a response is timed when the
    client reads it, so the breach cannot be told from the client's own delay. 7,000 ms can."""
    waited = [second(1001.0, {50: 150}, client_cpu_pct=7.0, client_wait_pct=20.0),
              second(1002.0, {330: 119}, client_cpu_pct=7.0, client_wait_pct=35.6),
              second(1003.0, {7000: 100}, client_cpu_pct=7.0, client_wait_pct=35.6)]
    assert client_caused(waited) == set()  # not "behind" by the step rule (7 + 36 < 90)
    assert breach_client_bound_s(waited, CLOCK, 250.0, 95.0) == 30.0  # second 2 only: 330 - 356 - 200 <= 250
