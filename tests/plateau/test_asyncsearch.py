"""The async capacity rule on synthetic backlog series: a bounded backlog (however noisy) is not
growth, a steady climb is; the search stops at the first growing step and names the rate before it."""

from __future__ import annotations

import numpy as np
import pytest

from sm_locust.plateau.asyncsearch import (
    BOUNDED,
    GROWS,
    UNDECIDED,
    AsyncRateSearch,
    backlog_slope,
    mean_ci,
)


def queue_backlog(arrival_rps: float, service_rps: float, seconds: int, seed: int) -> list[float]:
    """A queue's backlog at the end of each second: Poisson arrivals and completions (none when empty)."""
    rng = np.random.default_rng(seed)
    level, out = 0.0, []
    for _ in range(seconds):
        level = max(0.0, level + rng.poisson(arrival_rps) - rng.poisson(service_rps))
        out.append(level)
    return out


@pytest.mark.parametrize("seed", range(20))
def test_a_queue_below_its_capacity_is_bounded(seed):
    slope = backlog_slope(queue_backlog(8, 10, 40, seed), settle_s=2)
    assert slope.verdict in (BOUNDED, UNDECIDED)
    assert slope.verdict == BOUNDED or not slope.interval.known


@pytest.mark.parametrize("seed", range(20))
def test_a_queue_above_its_capacity_grows(seed):
    slope = backlog_slope(queue_backlog(14, 10, 40, seed), settle_s=2)
    assert slope.verdict == GROWS
    assert slope.interval.low is not None and slope.interval.low > 0
    assert slope.interval.contains(slope.slope)
    assert slope.slope == pytest.approx(4, abs=2.5)  # arrivals - completions


def test_a_burst_that_drains_is_not_growth():
    series = [0, 0, 5, 12, 20, 26, 30, 28, 22, 15, 9, 4, 1, 0, 0, 1, 0, 0, 2, 0, 0, 1, 0, 0]
    slope = backlog_slope(series)
    assert slope.slope == pytest.approx(0.0)  # it came back where it started
    assert slope.verdict == BOUNDED


def test_too_few_seconds_decide_nothing():
    assert backlog_slope([1, 2, 3]).verdict == UNDECIDED
    assert backlog_slope([5, 6, 7, 8, 9, 10, 11], settle_s=5).verdict == UNDECIDED
    assert backlog_slope([]).slope is None
    mean, interval = mean_ci([1.0, 1.0, 1.0, 1.0])
    assert mean == 1.0 and (interval.low, interval.high) == (1.0, 1.0)


def test_settling_seconds_are_left_out():
    ramp_then_flat = [0, 10, 20, 30] + [30] * 20
    assert backlog_slope(ramp_then_flat).slope > 0
    assert backlog_slope(ramp_then_flat, settle_s=4).slope == 0


def _run(search: AsyncRateSearch, service_rps: float, seconds: int = 30) -> list[float]:
    rates = []
    seed = 0
    while search.stop_reason is None:
        rates.append(search.rate_rps)
        search.judge(queue_backlog(search.rate_rps, service_rps, seconds, seed))
        seed += 1
    return rates


def test_the_search_stops_at_the_first_growing_step_and_names_the_rate_before():
    search = AsyncRateSearch(start_rps=2, step_rps=2, max_rps=40)
    rates = _run(search, service_rps=9)
    assert rates == [2 * (i + 1) for i in range(len(rates))]
    assert rates[-1] > 9  # never stopped below what the queue completes
    assert [s.slope.verdict for s in search.steps] == [BOUNDED] * (len(rates) - 1) + [GROWS]
    assert search.capacity_rps == rates[-2]
    assert f"capacity {rates[-2]:g} req/s" in search.stop_reason
    record = search.as_dict()
    assert record["capacity_rps"] == rates[-2] and len(record["steps"]) == len(rates)
    assert record["steps"][-1]["backlog"] == GROWS and record["steps"][-1]["backlog_slope_ci95"][0] > 0


def test_growth_at_the_first_step_and_no_growth_up_to_the_max():
    first = AsyncRateSearch(start_rps=20, step_rps=5, max_rps=40)
    _run(first, service_rps=5)
    assert len(first.steps) == 1 and first.capacity_rps is None and "below 20 req/s" in first.stop_reason
    never = AsyncRateSearch(start_rps=1, step_rps=1, max_rps=3)
    assert _run(never, service_rps=50) == [1, 2, 3]
    assert never.capacity_rps == 3 and never.stop_reason.startswith("max rate 3 req/s reached")
    with pytest.raises(ValueError):
        AsyncRateSearch(start_rps=0, step_rps=1, max_rps=3)


def test_longer_steps_tell_a_smaller_growth_from_noise():
    """The rule only calls growth its interval shows: a rate a little past the capacity grows too
    slowly for a short step, so the capacity found comes closer to the true one as steps lengthen."""
    found = {}
    for seconds in (30, 60, 120):
        search = AsyncRateSearch(start_rps=2, step_rps=2, max_rps=40)
        _run(search, service_rps=9, seconds=seconds)
        found[seconds] = search.capacity_rps
    assert found[30] >= found[60] >= found[120]
    assert found[120] < 9 < found[120] + 2  # the last rate below what the queue completes
