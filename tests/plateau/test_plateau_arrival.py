"""Open-loop arrival schedules and late-send counting."""

import itertools
import statistics

import pytest

from sm_locust.errors import UsageError
from sm_locust.measure.steady import measure_step
from sm_locust.measure.timeline import Second
from sm_locust.plateau.arrival import (
    constant_arrivals,
    count_late,
    iter_constant_arrivals,
    iter_poisson_arrivals,
    latency_from_intended_ms,
    poisson_arrivals,
)


def test_constant_arrivals():
    times = constant_arrivals(10, 2.0, start=5.0)
    assert len(times) == 20 and times[0] == 5.0 and times[-1] == pytest.approx(6.9)
    assert all(b - a == pytest.approx(0.1) for a, b in itertools.pairwise(times))
    assert list(itertools.islice(iter_constant_arrivals(4), 3)) == [0.0, 0.25, 0.5]


def test_poisson_arrivals_seeded_and_at_rate():
    times = poisson_arrivals(200, 10.0, seed=7)
    assert times == poisson_arrivals(200, 10.0, seed=7)
    assert times != poisson_arrivals(200, 10.0, seed=8)
    assert abs(len(times) - 2000) < 4 * 2000 ** 0.5  # Poisson count: sd = sqrt(n)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert statistics.mean(gaps) == pytest.approx(1 / 200, rel=0.1)
    assert statistics.stdev(gaps) == pytest.approx(1 / 200, rel=0.15)  # exponential: sd == mean
    assert all(0 <= t < 10 for t in times)
    assert next(iter_poisson_arrivals(5, seed=1, start=3.0)) > 3.0


@pytest.mark.parametrize("rate,duration", [(0, 1), (-1, 1), (float("inf"), 1), (10, 0)])
def test_bad_rates(rate, duration):
    with pytest.raises(UsageError):
        constant_arrivals(rate, duration)


def test_count_late_and_feed_the_step():
    intended = [0.0, 0.1, 0.2, 0.3]
    late = count_late(intended, [0.0, 0.105, 0.25, None])
    assert (late.scheduled, late.sent, late.late) == (4, 3, 2)
    assert late.late_fraction == 0.5 and late.max_lag_s == pytest.approx(0.05)
    assert count_late(intended, [0.0, 0.1]).late == 2  # missing sends are late
    with pytest.raises(UsageError):
        count_late([0.0], [0.0, 1.0])
    seconds = [Second(t=float(i), users=50, spawning=False, requests=100, failures=0, hist={10: 100},
                      target_rate=100.0) for i in range(20)]
    step = measure_step(seconds, mode="rate", late_fraction=late.late_fraction)
    assert step.client_bound and "50 % of sends were late" in step.client_bound_reason


def test_latency_from_intended_send_time():
    # intended at 1.0 s, actually sent at 1.2 s (generator behind), response at 1.25 s: the user waited 250 ms
    assert latency_from_intended_ms(1.0, 1.25) == pytest.approx(250.0)
