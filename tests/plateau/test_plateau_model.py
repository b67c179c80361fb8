"""Closed-loop theory in the plateau search: Little's law places the knee, capacity is reported beside
it, goodput is what is judged, steps end once stable, and outside stops and budgets are named.
All driven with synthetic series and the closed-form endpoint (no Locust)."""

import pytest

from sm_locust.measure.steady import measure_step
from sm_locust.measure.timeline import Second
from sm_locust.plateau.conditions import MaxInvocationsPerMinute
from sm_locust.plateau.driver import ScheduleDriver, SearchDriver
from sm_locust.plateau.model import ClosedLoopModel, cycle_time_s
from sm_locust.plateau.search import PlateauSearch, ScheduleSearch
from sm_locust.plateau.synthetic import SyntheticEndpoint, synthetic_step
from sm_locust.plateau.traffic import parse_traffic_pattern


def drive(search, endpoint, seconds=10):
    decision = search.first()
    loads = []
    while not decision.stop:
        assert len(loads) < 40, "search did not stop"
        loads.append(int(decision.load))
        decision = search.feed(measure_step(endpoint.users_step(int(decision.load), seconds), min_subwindow_s=1))
    return loads, decision, search.verdict()


def test_littles_law_model_from_linear_steps():
    endpoint = SyntheticEndpoint(concurrency=6, service_ms=40.0, overhead_ms=2.0)  # 150 req/s, cycle 42 ms
    steps = [measure_step(endpoint.users_step(u, 20), min_subwindow_s=1) for u in (1, 2, 4, 8, 16)]
    assert cycle_time_s(steps) == pytest.approx(0.042, rel=0.02)  # queued steps (8, 16) are left out
    model = ClosedLoopModel.from_steps(steps, capacity=150.0)
    assert model.knee == pytest.approx(150 * 0.042, rel=0.02)
    assert model.predict(2) == pytest.approx(2 / 0.042, rel=0.02) and model.predict(100) == 150.0
    assert model.users_reaching(0.95) == 6
    assert ClosedLoopModel.from_steps([], capacity=150.0) is None


@pytest.mark.parametrize("concurrency,service_ms,overhead_ms,contention_ms", [
    (2, 40.0, 2.0, 0.0), (6, 40.0, 2.0, 0.0), (9, 40.0, 0.0, 0.0), (16, 100.0, 3.0, 0.0), (40, 100.0, 3.0, 0.0),
    (37, 25.0, 0.0, 0.0),
    (40, 100.0, 4.0, 0.15), (16, 50.0, 2.0, 0.3),  # cycles that grow with load before the knee (shared CPUs)
])
def test_past_saturation_the_knee_is_placed_and_confirmed_not_bisected(concurrency, service_ms, overhead_ms,
                                                                        contention_ms):
    def endpoint():
        return SyntheticEndpoint(concurrency=concurrency, service_ms=service_ms, overhead_ms=overhead_ms,
                                 contention_ms=contention_ms)

    loads, _, verdict = drive(PlateauSearch(1, 1000), endpoint())
    growth = loads.index(max(loads)) + 1  # x4 while linear, x2 past the knee, up to saturation
    assert len(loads) - growth <= 2, loads  # then at most: the model's knee, and the load next to it
    assert verdict.reached and verdict.bound == "throughput"
    model = endpoint()
    knee = next(n for n in range(1, 1000) if model.throughput(n) >= 0.95 * model.capacity)
    assert abs(verdict.plateau.load - knee) <= 1, (loads, knee)
    assert verdict.model_knee == pytest.approx(model.knee_users(), rel=0.05)
    _, _, blind = drive(PlateauSearch(1, 1000, use_model=False), endpoint())
    assert len(loads) <= len(blind.steps) + (1 if concurrency <= 2 else 0)  # a knee at 2 users: x4 overshoots once


@pytest.mark.parametrize("smoothness", [3.0, 6.0])
def test_a_knee_that_bends_early_falls_back_on_bisection_at_no_extra_cost(smoothness):
    def endpoint():
        return SyntheticEndpoint(concurrency=16, service_ms=50.0, smoothness=smoothness)

    loads, _, verdict = drive(PlateauSearch(1, 1000), endpoint())
    blind_loads, _, blind = drive(PlateauSearch(1, 1000, use_model=False), endpoint())
    assert verdict.plateau.load == blind.plateau.load and len(loads) <= len(blind_loads) + 1
    assert verdict.plateau.load > verdict.model_knee  # the bound's corner is optimistic on a soft knee


def test_capacity_is_reported_beside_the_knee():
    # 6 slots x 40 ms with 2 ms outside the slot: 6 users reach only 95 % of the capacity. The knee
    # (the least load within 5 % of the plateau) is 6 users at ~143 req/s; the endpoint sustains 150.
    endpoint = SyntheticEndpoint(concurrency=6, service_ms=40.0, overhead_ms=2.0)
    _, _, verdict = drive(PlateauSearch(1, 1000), endpoint)
    assert verdict.plateau.load == 6 and verdict.plateau.rps == pytest.approx(142.9, rel=0.01)
    assert verdict.capacity_rps == pytest.approx(150.0, rel=0.001) and verdict.capacity.load >= 6
    plateau = verdict.as_dict()
    assert plateau["capacity_rps"] == pytest.approx(150.0) and plateau["users"] == 6
    assert plateau["rps"] == pytest.approx(142.9, rel=0.01) and plateau["capacity_stable"] is True
    # a synthetic endpoint: every step exactly the same rate, a zero-width interval, printed as none ("(±0)" would
    # claim an exactness no measurement has)
    assert verdict.text().startswith("plateau: capacity 150 req/s at step 3: 16 users, p95 190 ms; "
                                     "knee step 5: 143 req/s at 6 users")


def test_capacity_prefers_stable_steps_beyond_the_knee():
    search = PlateauSearch(1, 64, extend_unstable=False, use_model=False)  # plain doubling
    search.first()
    for load, rps, stable in ((1, 100, True), (2, 200, True), (4, 400, True), (8, 440, False), (16, 420, True)):
        decision = search.feed(synthetic_step(load, rps, stable=stable))
    assert decision.stop or decision.load is not None
    verdict = search.verdict()
    # 8 users' 440 is noise (unstable): neither the capacity nor the knee, the least load stably on the plateau
    assert verdict.plateau.load == 16 and verdict.capacity.load == 16 and verdict.capacity_rps == 420


def test_goodput_not_completions_is_judged():
    # Completions keep doubling, but past 4 users every extra request fails fast: goodput is flat at 400.
    def measure(load):
        completions = 100.0 * load
        good = min(completions, 400.0)
        return synthetic_step(load, completions, error_rate=1 - good / completions)

    search = PlateauSearch(1, 64)  # no error-rate constraint: only goodput can stop it
    decision = search.first()
    loads = []
    while not decision.stop:
        loads.append(decision.load)
        decision = search.feed(measure(decision.load))
    verdict = search.verdict()
    assert loads[:3] == [1, 4, 16] and verdict.plateau.load == 4 and verdict.capacity_rps == pytest.approx(400)


def test_open_loop_offers_the_measured_capacity_and_confirms_it():
    endpoint = SyntheticEndpoint(concurrency=9, service_ms=40)  # 225 req/s

    def measure(rate):
        return measure_step(endpoint.rate_step(rate, 20), mode="rate", sent_rps=rate, min_subwindow_s=1)

    search = PlateauSearch(10, 10_000, mode="rate")
    decision = search.first()
    loads = []
    while not decision.stop:
        loads.append(decision.load)
        decision = search.feed(measure(decision.load))
    verdict = search.verdict()
    assert loads[:6] == [10, 20, 40, 80, 160, 320] and loads[6] == 225  # the capacity measured at 320
    assert len(loads) <= 9 and verdict.reached
    assert verdict.capacity_rps == pytest.approx(225, rel=0.01)
    assert 225 <= verdict.plateau.load <= 225 / 0.95


def _ticks(driver, rps_at, limit=600):
    """Run a SearchDriver once a second; `rps_at(users, second_in_step)` gives each second's count."""
    timeline, now, users, in_step = [], 1_000_000.0, None, 0
    decision = driver.tick(now, timeline)
    for _ in range(limit):
        if decision.stop:
            return timeline
        if decision.users != users:
            users, in_step = decision.users, 0
        now += 1.0
        in_step += 1
        timeline.append(Second(t=now, users=users, spawning=False, requests=rps_at(users, in_step), failures=0,
                               hist={20: rps_at(users, in_step)}))
        decision = driver.tick(now, timeline)
    raise AssertionError("driver did not stop")


def test_growth_quadruples_while_throughput_is_linear_and_doubles_once_it_bends():
    endpoint = SyntheticEndpoint(concurrency=40, service_ms=100.0, overhead_ms=3.0)  # knee ~41 users
    loads, _, verdict = drive(PlateauSearch(1, 1000), endpoint)
    assert loads[:5] == [1, 4, 16, 64, 128]  # 64 is past the knee (62 % of the bound): x2 to confirm
    assert verdict.steps[1].goodput_rps == pytest.approx(4 * verdict.steps[0].goodput_rps, rel=0.05)
    _, _, blind = drive(PlateauSearch(1, 1000, use_model=False), SyntheticEndpoint(
        concurrency=40, service_ms=100.0, overhead_ms=3.0))
    assert [m.load for m in blind.steps][:8] == [1, 2, 4, 8, 16, 32, 64, 128]
    assert len(loads) <= len(blind.steps) - 3


def test_a_step_past_the_knee_that_read_low_does_not_push_the_knee_up():
    # 12 slots x 20 ms (600 req/s, knee 12): 16 users read 7 % low (noise), under the plateau's 95 %.
    # Bisection would search 16..32; Little's law says 16 users already queue, so it tries 12 first.
    search = PlateauSearch(1, 128, extend_unstable=False)
    search.first()
    for load, rps in ((1, 50), (4, 200), (16, 560), (32, 615)):
        decision = search.feed(synthetic_step(load, rps))
    decision = search.feed(synthetic_step(64, 605))
    assert decision.load == 12 and "queue like a step past the knee" in decision.reason
    decision = search.feed(synthetic_step(12, 600))
    assert search.verdict().plateau.load == 12 and decision.load == 11  # then confirmed from below


def test_a_step_ends_once_stable_and_is_held_to_the_maximum_otherwise():
    flat = SearchDriver(PlateauSearch(1, 64), step_s=30, min_step_s=10, min_subwindow_s=1)
    _ticks(flat, lambda users, i: min(users, 6) * 25)
    durations = [m.t_end - m.t_start for m in flat.measurements]
    assert durations and all(d == 10 for d in durations)  # stable at the minimum: never held longer
    drifting = SearchDriver(PlateauSearch(1, 64, extend_unstable=False), step_s=30, min_step_s=10, min_subwindow_s=1)
    _ticks(drifting, lambda users, i: min(users, 6) * (10 + 3 * i))  # throughput climbs all step long
    assert all(m.t_end - m.t_start == 30 and not m.stable for m in drifting.measurements)
    fixed = SearchDriver(PlateauSearch(1, 64), step_s=12, min_subwindow_s=1)  # no minimum: fixed steps
    _ticks(fixed, lambda users, i: min(users, 6) * 25)
    assert all(m.t_end - m.t_start == 12 for m in fixed.measurements)


def test_a_step_lasts_by_the_seconds_the_timeline_holds_not_wall_time():
    # On a master the recorder appends each second ~4 s after it ended: a step judged at 10 s of wall
    # time would hold 6 s of data. The driver waits until the timeline holds the minimum.
    driver = SearchDriver(PlateauSearch(1, 64, extend_unstable=False), step_s=30, min_step_s=10, min_subwindow_s=1)
    produced, now = [], 1_000_000.0
    decision = driver.tick(now, [])
    while len(driver.measurements) < 3:
        now += 1.0
        produced.append(Second(t=now, users=decision.users, spawning=False, requests=25 * decision.users, failures=0,
                               hist={40: 25 * decision.users}))
        decision = driver.tick(now, [s for s in produced if s.t <= now - 4])
        assert now < 1_000_200
    assert [m.t_end - m.t_start for m in driver.measurements] == [10, 10, 10]


def test_ramping_seconds_do_not_count_towards_a_step():
    # Locust ramps down at the spawn rate too: 16 -> 3 users at 3 users/s spends ~4 s "spawning"
    # while the old load still completes requests. Those seconds are neither measured nor counted.
    driver = SearchDriver(PlateauSearch(3, 64, extend_unstable=False), step_s=30, min_step_s=4, min_subwindow_s=1)
    now = 1_000_000.0
    driver.tick(now, [])
    timeline = [Second(t=now + i, users=3, spawning=True, requests=90, failures=0, hist={40: 90}) for i in range(1, 5)]
    timeline += [Second(t=now + i, users=3, spawning=False, requests=70, failures=0, hist={40: 70})
                 for i in range(5, 8)]
    assert driver.tick(now + 7, timeline).load == 3 and not driver.measurements  # 3 s at the load: hold on
    timeline.append(Second(t=now + 8, users=3, spawning=False, requests=70, failures=0, hist={40: 70}))
    driver.tick(now + 8, timeline)
    (step,) = driver.measurements
    assert step.rps == pytest.approx(70) and step.total_requests == 4 * 90 + 4 * 70


def test_an_outside_stop_judges_the_step_under_way_and_names_itself():
    driver = SearchDriver(PlateauSearch(1, 64), step_s=30, min_step_s=10, min_subwindow_s=1)
    timeline, now = [], 1_000_000.0
    decision = driver.tick(now, timeline)
    for _ in range(25):  # 1 user (10 s), 4 users (10 s), then 5 s of 16 users: too short to judge
        now += 1.0
        timeline.append(Second(t=now, users=decision.users, spawning=False, requests=25 * decision.users, failures=0,
                               hist={40: 25 * decision.users}))
        decision = driver.tick(now, timeline)
    assert [m.load for m in driver.measurements] == [1, 4]
    stop = driver.finish(now, timeline, "run time 25 s reached (-t)")
    assert stop.stop and len(driver.search.steps) == 2
    verdict = driver.search.verdict()
    assert verdict.stop_reason == "run time 25 s reached (-t)" and not verdict.reached
    assert "run time 25 s reached (-t)" in verdict.text()
    longer = SearchDriver(PlateauSearch(1, 64), step_s=30, min_step_s=10, min_subwindow_s=1)
    longer.tick(now, [])
    seconds = [Second(t=now + i, users=1, spawning=False, requests=20, failures=0, hist={50: 20}) for i in range(1, 13)]
    longer.finish(now + 12, seconds, "stopped from the web UI")
    assert [m.load for m in longer.search.steps] == [1]  # 12 s >= the minimum: judged, not lost


def test_a_budget_is_named_rather_than_the_end_of_the_pattern():
    search = ScheduleSearch(4, 4, conditions=[MaxInvocationsPerMinute(1000)])
    search.first()
    stop = search.follow(synthetic_step(4, 155.8), None)  # the last level, at 9,346 invocations/min
    assert stop.stop and stop.reason == "invocations 9348/min >= MaxInvocations 1000/min"
    assert search.verdict().stop_reason == stop.reason


def test_a_budget_fires_inside_a_long_level():
    # One 10-minute level of 4 users at ~155 req/s; MaxInvocations 1000/min stops it after ~10 s.
    pattern = parse_traffic_pattern({
        "TrafficPattern": {"TrafficType": "PHASES",
                           "Phases": [{"InitialNumberOfUsers": 4, "SpawnRate": 0, "DurationInSeconds": 600}]},
        "StoppingConditions": {"MaxInvocations": 1000}})
    search = ScheduleSearch(4, 4, conditions=pattern.stopping.conditions())
    driver = ScheduleDriver(pattern.at, search, min_subwindow_s=1)
    endpoint = SyntheticEndpoint(concurrency=4, service_ms=25.7)
    timeline, now = [], endpoint.clock
    level = driver.tick(now, timeline)
    ticks = 0
    while level is not None:
        ticks += 1
        assert ticks < 60, "the budget never fired"
        timeline += endpoint.users_step(level[0], 1, ramp_s=0)
        now = endpoint.clock
        level = driver.tick(now, timeline)
    assert 10 <= ticks <= 16
    assert driver.stop_reason.startswith("invocations ") and driver.stop_reason.endswith(">= MaxInvocations 1000/min")
    verdict = search.verdict()
    assert verdict.stop_reason == driver.stop_reason and len(verdict.steps) == 1
