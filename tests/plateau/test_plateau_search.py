"""The searches, driven step by step with synthetic series and a closed-form endpoint."""

import math

import pytest

from sm_locust.errors import UsageError
from sm_locust.measure.steady import measure_step
from sm_locust.plateau.conditions import ErrorRate, LatencySLO, MaxDuration, ThroughputGain
from sm_locust.plateau.search import PlateauSearch, StepSearch
from sm_locust.plateau.synthetic import SyntheticEndpoint, synthetic_step
from tests.plateau.feed import feed


def drive(search, measure, limit=60):
    """Run a search to the end; `measure(load, index)` returns the StepMeasurement of that step."""
    decision = search.first()
    loads = []
    while not decision.stop:
        assert len(loads) < limit, "search did not stop"
        loads.append(decision.load)
        decision = search.feed(measure(decision.load, len(loads) - 1))
    return loads, decision, search.verdict()


def from_series(rps, **per_step):
    """Step i of a linear search gets rps[i]; per_step values are lists indexed the same way."""
    def measure(load, i):
        extra = {k: v[i] for k, v in per_step.items()}
        return synthetic_step(load, rps[i], t_start=20.0 * i, **extra)
    return measure


def endpoint_measure(endpoint, seconds=20):
    return lambda load, i: measure_step(endpoint.users_step(int(load), seconds))


def test_clean_plateau_linear_steps():
    rps = [100, 200, 400, 800, 1000, 1000, 1005, 1002, 1001, 1003]
    loads, decision, verdict = drive(StepSearch(1, 1, 32), from_series(rps))
    assert loads == [1, 2, 3, 4, 5, 6, 7, 8]
    assert decision.reason == "throughput gain < 5 % over 4 steps"
    assert verdict.reached and verdict.bound == "throughput"
    assert verdict.plateau.load == 5 and verdict.plateau.rps == 1000
    assert verdict.text() == ("plateau: capacity 1,005 req/s at step 7: 7 users, p95 20 ms; "
                              "knee step 5: 1000 req/s at 5 users, p95 20 ms \u2014 "
                              "throughput gain < 5 % over 4 steps")
    assert verdict.capacity.load == 7  # the best stable goodput at or beyond the knee
    plateau = verdict.as_dict()
    assert {k: plateau[k] for k in ("users", "rps", "p50_ms", "p95_ms", "p99_ms", "reason", "stable")} == {
        "users": 5, "rps": 1000.0, "p50_ms": 10.0, "p95_ms": 20.0, "p99_ms": 30.0,
        "reason": "throughput gain < 5 % over 4 steps", "stable": True,
    }
    assert plateau["reached"] is True and plateau["client_bound"] is False


def test_keep_going_past_the_knee_when_asked():
    rps = [100, 200, 400, 800, 1000, 1000, 1005, 1002, 1001, 1003]
    loads, decision, verdict = drive(StepSearch(1, 1, 10, stop_at_knee=False), from_series(rps))
    assert len(loads) == 10 and decision.reason == "reached max users 10"
    assert verdict.reached and verdict.plateau.load == 5


def test_monotone_growth_to_max_users():
    loads, decision, verdict = drive(StepSearch(1, 1, 8), from_series([100 * (i + 1) for i in range(8)]))
    assert loads == list(range(1, 9)) and decision.reason == "reached max users 8"
    assert not verdict.reached and verdict.bound == "limit" and verdict.plateau.load == 8
    assert verdict.text().startswith("no plateau reached (reached max users 8; throughput still growing (+14 %")
    endpoint = SyntheticEndpoint(concurrency=1000, service_ms=10)
    loads, decision, verdict = drive(PlateauSearch(1, 64), endpoint_measure(endpoint))
    assert loads == [1, 4, 16, 64]  # linear in users all along: x4 each step
    assert not verdict.reached and "no plateau reached" in verdict.text() and verdict.as_dict()["users"] == 64


def test_latency_explodes_before_throughput_plateaus():
    rps = [100 * (i + 1) for i in range(10)]
    p95 = [20, 20, 22, 25, 30, 35, 45, 80, 150, 300]
    loads, decision, verdict = drive(StepSearch(1, 1, 10, conditions=[LatencySLO(95, 40)]),
                                     from_series(rps, p95_ms=p95))
    assert loads == [1, 2, 3, 4, 5, 6, 7]
    assert decision.reason == "p95 45 ms > SLO 40 ms at 7 users"
    assert verdict.reached and verdict.bound == "latency" and verdict.plateau.load == 6
    assert verdict.text() == ("plateau: capacity 600 req/s at step 6: 6 users, p95 35 ms; "
                              "knee step 6: 600 req/s at 6 users, p95 35 ms \u2014 "
                              "p95 45 ms > SLO 40 ms at 7 users")  # beyond the knee every step breaks the SLO

    def growing(load, i):  # throughput linear up to 64 users, p95 = 20 + 3 u^2 ms
        return synthetic_step(load, 100 * load, p95_ms=20 + 3 * load * load, t_start=20.0 * i)

    loads, decision, verdict = drive(PlateauSearch(1, 64, conditions=[LatencySLO(95, 200)]), growing)
    assert loads == [1, 4, 16, 10, 7, 8]  # grew (x4: linear) to the first violation, then bisected 4..16
    assert verdict.plateau.load == 7 and verdict.bound == "latency"
    assert verdict.reason == "p95 212 ms > SLO 200 ms at 8 users"


def test_error_burst_stops_and_plateau_is_below_it():
    rps = [100, 200, 300, 400, 480, 490, 500]
    errors = [0, 0, 0, 0, 0.075, 0, 0]
    loads, decision, verdict = drive(StepSearch(1, 1, 7, conditions=[ErrorRate(0.05)]),
                                     from_series(rps, error_rate=errors))
    assert loads == [1, 2, 3, 4, 5] and decision.reason == "error rate 7.5 % > 5 % at 5 users"
    assert verdict.bound == "errors" and verdict.plateau.load == 4
    assert verdict.as_dict()["error_rate"] == 0


def test_first_step_already_violates():
    loads, decision, verdict = drive(PlateauSearch(4, 64, conditions=[LatencySLO(95, 10)]),
                                     lambda load, i: synthetic_step(load, 100, p95_ms=50))
    assert loads == [4] and verdict.plateau is None and not verdict.reached
    assert verdict.text() == ("no acceptable step: the capacity within the constraints is below the lowest load "
                              "measured, 4 users (p95 50 ms > SLO 10 ms at 4 users)")
    assert verdict.as_dict()["users"] is None and verdict.bound == "below-lowest-load" and not verdict.inconclusive


def test_client_bound_series_is_never_the_plateau():
    rps = [100, 200, 300, 400, 450, 452]
    cpu = [20, 40, 60, 80, 92, 97]
    loads, decision, verdict = drive(StepSearch(1, 1, 10), from_series(rps, client_cpu_pct=cpu))
    assert loads == [1, 2, 3, 4, 5, 5]  # the client-bound step is measured once more before the search gives up
    assert verdict.client_bound and not verdict.reached and verdict.bound == "client"
    assert verdict.plateau.load == 4  # best endpoint-bound step, reported as such
    assert verdict.text() == ("INCONCLUSIVE: the load generator was the bottleneck (add workers): "
                              "client CPU 97 % >= 90 % at 5 users (measured twice); "
                              "best endpoint-bound step 4: 400 req/s at 4 users, p95 20 ms")
    assert verdict.as_dict()["client_bound"] is True and verdict.as_dict()["inconclusive"] is True


def test_open_loop_generator_falling_behind_is_client_bound():
    def measure(rate, i):
        return synthetic_step(rate, min(rate, 300), mode="rate", sent_rps=min(rate, 300), t_start=20.0 * i)

    loads, decision, verdict = drive(PlateauSearch(50, 2000, mode="rate"), measure)
    assert loads == [50, 100, 200, 400, 400] and verdict.client_bound
    assert "sent 300.0 req/s is 75 % of the intended 400.0 req/s" in verdict.text()


@pytest.mark.parametrize("concurrency,service_ms,max_users",
                         [(9, 40.0, 256), (37, 25.0, 256), (100, 10.0, 1024), (3, 100.0, 64)])
def test_bisection_converges_to_capacity(concurrency, service_ms, max_users):
    endpoint = SyntheticEndpoint(concurrency=concurrency, service_ms=service_ms)
    capacity = endpoint.capacity
    loads, decision, verdict = drive(PlateauSearch(1, max_users), endpoint_measure(endpoint))
    assert verdict.reached and verdict.bound == "throughput"
    assert capacity * 0.95 <= verdict.plateau.rps <= capacity * 1.001
    knee = concurrency
    assert 0.95 * knee - 1 <= verdict.plateau.load <= knee + 1
    growth = math.ceil(math.log2(knee)) + 2
    assert len(loads) <= growth + math.ceil(math.log2(knee)) + 1  # doublings + bisection


def test_open_loop_rate_search_converges():
    endpoint = SyntheticEndpoint(concurrency=9, service_ms=40)  # 225 req/s

    def measure(rate, i):
        return measure_step(endpoint.rate_step(rate, 20), mode="rate", sent_rps=rate)

    loads, decision, verdict = drive(PlateauSearch(10, 10_000, mode="rate"), measure)
    assert verdict.reached and not verdict.client_bound
    assert 0.95 * 225 <= verdict.plateau.rps <= 225
    assert verdict.as_dict()["rate"] == verdict.plateau.load
    assert len(loads) <= 12


def _sequential(search, endpoint, step_s=240.0):
    """Drive `search` once a second through a SearchDriver: steps lengthen while their figures are undecided."""
    from sm_locust.plateau.driver import SearchDriver

    driver = SearchDriver(search, step_s=step_s, min_step_s=10, min_subwindow_s=1)
    feed(driver, endpoint)
    return search.verdict()


def test_noisy_throughput_still_finds_the_knee():
    """+-25 % per-second noise: fixed 24-s steps cannot tell a 5 % gain from noise, so a verdict taken on
    them says INCONCLUSIVE (with what it could not decide) or is right; steps lengthened until their
    figures decide (the driver, sequential measurement) find the knee in most runs, and a run that does
    not says INCONCLUSIVE rather than answer wrong."""
    conclusive = 0
    for seed in range(4):
        for make in (lambda: StepSearch(2, 2, 40), lambda: PlateauSearch(1, 128)):
            endpoint = SyntheticEndpoint(concurrency=12, service_ms=20, noise=0.25, seed=seed)  # 600 req/s
            fixed = drive(make(), endpoint_measure(endpoint, seconds=24))[2]
            endpoint = SyntheticEndpoint(concurrency=12, service_ms=20, noise=0.25, seed=seed)
            for verdict in (fixed, _sequential(make(), endpoint)):
                if verdict.inconclusive:
                    assert verdict.text().startswith("INCONCLUSIVE (") and (
                        "straddles" in verdict.inconclusive_reason or "not known to" in verdict.inconclusive_reason)
                    continue
                assert verdict.reached, (seed, verdict.text())
                assert 0.9 * 600 <= verdict.plateau.rps <= 1.1 * 600  # +-25 % per-second noise
                assert 9 <= verdict.plateau.load <= 14
                conclusive += verdict is not fixed
    assert conclusive >= 4  # of the 8 sequential searches


def test_unstable_step_is_extended_once_then_marked():
    search = StepSearch(1, 1, 3)
    assert search.first().load == 1
    first = search.feed(synthetic_step(1, 100, stable=False))
    assert first.extend and first.load == 1 and "unstable" in first.reason
    again = search.feed(synthetic_step(1, 100, stable=False))
    assert not again.extend and again.load == 2
    assert search.verdict().plateau.stable is False
    search.feed(synthetic_step(2, 200))
    search.feed(synthetic_step(3, 205))
    assert "(unstable)" not in search.verdict().text()
    no_extend = StepSearch(1, 1, 3, extend_unstable=False)
    no_extend.first()
    assert no_extend.feed(synthetic_step(1, 100, stable=False)).load == 2


def test_budgets_stop_the_search():
    search = PlateauSearch(1, 64, conditions=[MaxDuration(60)])
    loads, decision, verdict = drive(search, lambda load, i: synthetic_step(load, 100 * load, t_start=20.0 * i))
    assert loads == [1, 4, 16] and decision.reason == "max duration 60 s reached"
    assert not verdict.reached and "max duration 60 s reached" in verdict.text()


def test_custom_gain_condition_is_used():
    search = StepSearch(1, 1, 20, conditions=[ThroughputGain(0.10, 3)])
    loads, decision, _ = drive(search, from_series([100, 200, 300, 320, 330, 335, 340, 340]))
    assert decision.reason == "throughput gain < 10 % over 3 steps" and loads == [1, 2, 3, 4, 5, 6]


def test_misuse_is_a_usage_error():
    with pytest.raises(UsageError, match="before first"):
        StepSearch().feed(synthetic_step(1, 1))
    search = StepSearch()
    search.first()
    with pytest.raises(UsageError, match="rate"):
        search.feed(synthetic_step(1, 1, mode="rate"))
    for bad in (lambda: StepSearch(10, 1, 5), lambda: StepSearch(1.5, 1, 5), lambda: PlateauSearch(1, 0),
                lambda: PlateauSearch(1, 8, factor=1), lambda: PlateauSearch(1, 8, mode="threads")):
        with pytest.raises(UsageError):
            bad()


def test_feed_after_stop_repeats_the_stop():
    search = StepSearch(1, 1, 1)
    search.first()
    stop = search.feed(synthetic_step(1, 100))
    assert stop.stop and search.done and search.feed(synthetic_step(1, 100)) is stop


def test_driver_runs_a_search_once_per_tick():
    from sm_locust.plateau.driver import SearchDriver

    endpoint = SyntheticEndpoint(concurrency=6, service_ms=50)  # 120 req/s, knee at 6 users
    driver = SearchDriver(PlateauSearch(1, 64), step_s=20)
    timeline = []
    now = endpoint.clock
    decision = driver.tick(now, timeline)
    ticks = 0
    while not decision.stop:
        ticks += 1
        assert ticks < 2000
        users = decision.users
        decision = driver.tick(now, timeline)
        if decision.users != users and not decision.stop:
            timeline += endpoint.users_step(decision.users, 0, ramp_s=1)  # a ramp second on change
        timeline += endpoint.users_step(decision.users or users, 1, ramp_s=0)
        now = endpoint.clock
    verdict = driver.search.verdict()
    assert verdict.reached and verdict.plateau.load == 6 and verdict.plateau.rps == pytest.approx(120)
    assert len(driver.measurements) == len(driver.search.steps)


def test_flat_last_steps_short_of_the_window_are_not_called_growing():
    """Three flat steps after the knee do not confirm a plateau under a 4-step rule, but the verdict
    must not claim throughput is still growing."""
    loads, decision, verdict = drive(StepSearch(1, 3, 13), from_series([45, 168, 180, 181, 180]))
    assert loads == [1, 4, 7, 10, 13] and not verdict.reached
    text = verdict.text()
    assert "still growing" not in text
    assert "flat over the last step" in text


@pytest.mark.parametrize("search", [lambda: PlateauSearch(1, 64), lambda: StepSearch(1, 1, 10)])
def test_a_step_dominated_by_failures_is_its_failures_not_a_client_bottleneck(search):
    """100 % of requests failing fast at 100 % client CPU (NoCredentialsError at 46,000/s): failures, not the client."""
    step = synthetic_step(1, 46_000, error_rate=1.0, client_cpu_pct=100)
    assert step.failure_dominated and not step.client_bound
    loads, decision, verdict = drive(search(), lambda load, i: step)
    assert loads == [1] and not verdict.client_bound and not verdict.inconclusive and verdict.plateau is None
    assert verdict.text() == ("no acceptable step: the capacity within the constraints is below the lowest load "
                              "measured, 1 user (100 % of 920,000 requests failed at 1 user)")
    half = synthetic_step(1, 100, error_rate=0.5, client_cpu_pct=100)  # half: not a majority, the client's CPU counts
    assert not half.failure_dominated and half.client_bound


def test_a_plateau_whose_throughput_falls_as_load_grows_says_so():
    """Inference components: the most at 1 user, 1,104 req/s at 4: contention, said on the verdict's line."""
    rps = [2022, 1500, 1300, 1104]
    loads, decision, verdict = drive(StepSearch(1, 1, 4), from_series(rps))
    assert verdict.capacity.load == 1
    assert verdict.text().endswith("; WARNING: throughput falls as load grows: 2,022.0 req/s at step 1: 1 user, "
                                   "1,104.0 req/s at step 4: 4 users (more load served less: contention, not a "
                                   "plateau; size for the lower load)"), verdict.text()
    flat = drive(StepSearch(1, 1, 4), from_series([100, 200, 300, 290]))[2]  # within 10 %: a plateau, no warning
    assert "WARNING" not in flat.text() and flat.falling() is None


@pytest.mark.parametrize(("min_step_s", "budget", "cut_step_judged"), [(None, 50, False), (8.0, 43, True),
                                                                  (8.0, 50, False)])
def test_a_duration_budget_ends_the_step_under_way_at_the_tick_it_fires(min_step_s, budget, cut_step_judged):
    """The budget bounds the run: the step under way when `budget` s are spent ends at that tick, judged as
    it is when it ran `min_step_s` (else left out), and the stop names the budget."""
    from sm_locust.plateau.driver import SearchDriver

    endpoint = SyntheticEndpoint(concurrency=6, service_ms=50, noise=0.3)  # noisy: steps hold longer
    search = PlateauSearch(1, 64, conditions=[MaxDuration(budget)], extend_unstable=False)
    driver = SearchDriver(search, step_s=20, min_step_s=min_step_s, min_subwindow_s=1)
    timeline: list = []
    start = endpoint.clock
    decision = driver.tick(start, timeline)
    while not decision.stop:
        timeline += endpoint.users_step(decision.users, 1, ramp_s=0)
        decision = driver.tick(endpoint.clock, timeline)
        assert endpoint.clock - start < 200, "the budget never ended the run"
    assert decision.reason == f"max duration {budget} s reached"
    assert endpoint.clock - start == budget  # the tick the budget fired at, not the end of the step under way
    first, last = driver.measurements[0], driver.measurements[-1]
    spent = last.t_end - first.t_start
    if cut_step_judged:  # the step under way had run min_step_s: judged as it is, ending at the budget
        assert spent == budget and min_step_s <= last.t_end - last.t_start < 20
    else:  # it had not: left out, the steps before it stand
        assert budget - (min_step_s or 20) < spent < budget
    assert not search.verdict().reached and f"max duration {budget} s reached" in search.verdict().text()
