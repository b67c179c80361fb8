"""A client-bound step is measured once more before the search gives up: the load generator's stall
may be transient; bound twice, the verdict is INCONCLUSIVE and names the generator and its fix."""

from __future__ import annotations

from sm_locust.measure.looplag import FIX_CPU_LIMIT, FIX_WORKERS, LoopLag, generator_fix
from sm_locust.plateau.driver import SearchDriver
from sm_locust.plateau.search import PlateauSearch, ScheduleSearch, StepSearch
from sm_locust.plateau.synthetic import SyntheticEndpoint, synthetic_step
from tests.plateau.feed import feed

THROTTLED = LoopLag(samples=1000, p50_ms=0.1, p99_ms=2.0, max_ms=5.0, lagging=0.01, throttled_periods=0.2,
                    throttled_s=1.5)


def throttled_step(load, rps):
    step = synthetic_step(load, rps)
    step.loop_lag = THROTTLED
    return step


def test_the_fix_names_the_cpu_limit_only_when_the_cgroup_throttled():
    assert generator_fix(THROTTLED) == FIX_CPU_LIMIT
    assert generator_fix(None) == FIX_WORKERS
    assert generator_fix(LoopLag(samples=1000, p50_ms=5, p99_ms=40, max_ms=60, lagging=0.5)) == FIX_WORKERS


def test_a_transient_stall_is_measured_again_and_the_search_goes_on():
    search = StepSearch(1, 1, 4)
    search.first()
    assert search.feed(synthetic_step(1, 100)).load == 2
    again = search.feed(synthetic_step(2, 150, client_cpu_pct=95))  # a stall: the generator's CPU, once
    assert again.load == 2 and again.extend and "measuring it again" in again.reason and "transient" in again.reason
    assert search.feed(synthetic_step(2, 200)).load == 3  # the re-measure is endpoint-bound: the search goes on
    verdict = search.verdict()
    assert not verdict.client_bound and verdict.client_reason is None
    assert [m.client_bound for m in verdict.steps] == [False, True, False]  # the stalled measurement stays, flagged
    assert search._by_load[2.0].rps == 200  # ... and the re-measure replaces it


def test_client_bound_twice_ends_inconclusive_naming_the_generator_and_the_fix():
    search = PlateauSearch(2, 64)
    search.first()
    assert search.feed(synthetic_step(2, 100, client_cpu_pct=95)).load == 2
    stop = search.feed(synthetic_step(2, 100, client_cpu_pct=96))
    assert stop.stop and "measured twice" in stop.reason
    verdict = search.verdict()
    assert verdict.inconclusive and verdict.client_bound
    # one wording on every surface: the console line is the verdict's reason, the fix up front
    assert verdict.text() == f"INCONCLUSIVE: {verdict.inconclusive_reason}"
    assert verdict.inconclusive_reason.startswith(f"the load generator was the bottleneck ({FIX_WORKERS}): client CPU ")
    assert verdict.inconclusive_reason.count(FIX_WORKERS) == 1
    # throttled by its cgroup: the fix is the pod's CPU limit, not more workers
    search = PlateauSearch(2, 64)
    search.first()
    search.feed(throttled_step(2, 100))
    assert search.feed(throttled_step(2, 100)).stop
    verdict = search.verdict()
    # the fix is named once: the throttling reason names it already, so the line does not repeat it up front
    assert verdict.text().startswith("INCONCLUSIVE: the load generator was the bottleneck: it was CPU-throttled by "
                                     "its cgroup limit in ")  # the load generator said once
    assert verdict.text().count(FIX_CPU_LIMIT) == 1
    assert FIX_CPU_LIMIT in verdict.inconclusive_reason and FIX_WORKERS not in verdict.inconclusive_reason


def test_each_load_is_measured_again_once_and_a_schedule_never():
    search = StepSearch(1, 1, 4)
    search.first()
    assert search.feed(synthetic_step(1, 100, client_cpu_pct=95)).load == 1
    assert search.feed(synthetic_step(1, 100)).load == 2
    assert search.feed(synthetic_step(2, 200, client_cpu_pct=95)).load == 2  # another load: its own re-measure
    assert search.feed(synthetic_step(2, 200, client_cpu_pct=95)).stop
    schedule = ScheduleSearch(1, 4)
    schedule.first()
    assert schedule.follow(synthetic_step(1, 100, client_cpu_pct=95), 2).stop  # the schedule owns the clock


def test_the_driver_holds_the_same_load_for_the_re_measure():
    stalled = {"seconds": 0}

    def cpu(rps):
        # the generator stalls for the first 12 s it runs at >= 150 req/s (4 users and up), then recovers
        if rps < 150:
            return 5.0
        stalled["seconds"] += 1
        return 95.0 if stalled["seconds"] <= 12 else 5.0

    endpoint = SyntheticEndpoint(concurrency=8, service_ms=40.0, overhead_ms=2.0, client_cpu=cpu)
    driver = SearchDriver(PlateauSearch(1, 64), step_s=30, min_step_s=10, min_subwindow_s=1)
    feed(driver, endpoint, limit=3000)
    verdict = driver.search.verdict()
    bound = [m for m in driver.measurements if m.client_bound]
    assert len(bound) == 1, [(m.load, m.client_bound) for m in driver.measurements]
    following = driver.measurements[driver.measurements.index(bound[0]) + 1]
    assert following.load == bound[0].load and not following.client_bound  # the same load, measured again
    assert not verdict.client_bound and verdict.reached, verdict.text()
