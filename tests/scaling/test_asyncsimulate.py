"""The async policies offline (scaling/asyncsimulate.py) on synthetic arrivals: from zero, a few
requests wait forever under target tracking alone and are answered after the alarm and the instance
start with the step policy; a busy hour then idle scales out, then in to zero, billing only the
instances that served."""

from __future__ import annotations

from sm_locust.scaling.asyncpolicy import AsyncAutoscaler, BacklogPolicy, StepFromZero
from sm_locust.scaling.asyncsimulate import simulate_async

TRACK = BacklogPolicy(0, 4, 5.0, scale_out_cooldown_s=300, scale_in_cooldown_s=300)


def scaler(from_zero: bool, initial: int = 0) -> AsyncAutoscaler:
    return AsyncAutoscaler(initial, tracking=TRACK, from_zero=StepFromZero(4) if from_zero else None,
                           activity_s=120)


def test_a_few_requests_from_zero_wait_for_ever_without_the_step_policy():
    arrivals = [0.5, 10.0, 20.0]
    alone = simulate_async(arrivals, scaler(False), service_s=2.0, workers=2, until_s=1800)
    assert alone.answered == 0 and alone.instance_seconds == 0 and alone.first_time_to_result_s is None
    woken = simulate_async(arrivals, scaler(True), service_s=2.0, workers=2, until_s=1800)
    assert woken.answered == 3
    # alarm at the end of the second minute (120 s), serving 120 s later; then the 2-s service
    assert woken.first_time_to_result_s == 240.0 + 2.0 - 0.5
    assert woken.times_to_result[2] == 240.0 + 2.0 + 2.0 - 20.0  # 2 workers: the third waits for one
    assert woken.decisions[0].to_count == 1 and woken.decisions[-1].to_count == 0  # back to zero when idle
    assert 0 < woken.instance_seconds < 1800 - 240  # billed only while it served


def test_a_busy_spell_scales_out_then_in_to_zero_and_the_step_policy_starts_sooner():
    busy = [i / 4 for i in range(4 * 900)]  # 4 req/s for 15 minutes, then nothing
    results = {}
    for from_zero in (False, True):
        sim = simulate_async(busy, scaler(from_zero), service_s=1.0, workers=2, until_s=3600)
        assert sim.answered == len(busy)  # every request answered in the hour
        assert max(d.to_count for d in sim.decisions) >= 2  # 4 req/s need 2 instances of 2 workers of 1 s
        assert sim.decisions[-1].to_count == 0  # scaled in to zero once idle
        results[from_zero] = sim
    assert results[True].first_time_to_result_s < results[False].first_time_to_result_s
    assert results[True].percentile_s(50) <= results[False].percentile_s(50)


def test_the_percentile_counts_the_unanswered_as_never():
    sim = simulate_async([0.0, 1.0], scaler(False, initial=1), service_s=0.5, workers=1, until_s=120)
    assert sim.times_to_result == (0.5, 0.5) and sim.percentile_s(95) == 0.5
    stuck = simulate_async([0.0, 1.0, 2.0], scaler(False), service_s=0.5, workers=1, until_s=60)
    assert stuck.percentile_s(50) is None and simulate_async([], scaler(False), service_s=1, workers=1,
                                                             until_s=10).percentile_s(50) is None
