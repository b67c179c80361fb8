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


def test_the_search_stops_at_the_first_growing_step_and_brackets_the_capacity():
    search = AsyncRateSearch(start_rps=2, step_rps=2, max_rps=40)
    rates = _run(search, service_rps=9)
    assert rates == [2 * (i + 1) for i in range(len(rates))]
    verdicts = [s.slope.verdict for s in search.steps]
    assert verdicts[-1] == GROWS and GROWS not in verdicts[:-1]
    assert rates[-1] > 9  # never stopped below what the queue completes
    bounded = [s.rate_rps for s in search.steps if s.slope.verdict == BOUNDED]
    assert search.capacity_rps == max(bounded) <= 9 < search.grows_at_rps == rates[-1]
    assert f"capacity {search.capacity_rps:g} to {rates[-1]:g} req/s" in search.stop_reason
    record = search.as_dict()
    assert (record["capacity_rps"], record["grows_at_rps"], len(record["steps"])) == (
        search.capacity_rps, rates[-1], len(rates))
    assert record["steps"][-1]["backlog"] == GROWS and record["steps"][-1]["backlog_slope_ci95"][0] > 0
    assert record["steps"][0]["tolerance_per_s"] == pytest.approx(0.2)  # a tenth of 2 req/s


def test_a_wide_interval_is_undecided_not_bounded():
    wandering = [0, 3, 1, 6, 2, 9, 4, 8, 1, 7, 3, 5]
    assert backlog_slope(wandering).verdict == BOUNDED  # no tolerance: it reaches 0
    assert backlog_slope(wandering, tolerance=0.5).verdict == UNDECIDED
    assert backlog_slope([5] * 12, tolerance=0.5).verdict == BOUNDED


def test_growth_at_the_first_step_and_no_growth_up_to_the_max():
    first = AsyncRateSearch(start_rps=20, step_rps=5, max_rps=40)
    _run(first, service_rps=5)
    assert len(first.steps) == 1 and first.capacity_rps is None and "below 20 req/s" in first.stop_reason
    never = AsyncRateSearch(start_rps=1, step_rps=1, max_rps=3)
    assert _run(never, service_rps=50, seconds=120) == [1, 2, 3]
    assert never.grows_at_rps is None and never.stop_reason.startswith("max rate 3 req/s reached")
    with pytest.raises(ValueError):
        AsyncRateSearch(start_rps=0, step_rps=1, max_rps=3)


def test_longer_steps_narrow_the_bracket():
    """The rule calls only what its interval shows: near the capacity a short step is undecided, so
    the bracket [highest bounded, first growing) narrows as steps lengthen, and always holds 9."""
    brackets = []
    for seconds in (30, 60, 120):
        search = AsyncRateSearch(start_rps=2, step_rps=2, max_rps=40)
        _run(search, service_rps=9, seconds=seconds)
        assert search.capacity_rps is not None and search.grows_at_rps is not None
        assert search.capacity_rps <= 9 < search.grows_at_rps
        brackets.append(search.grows_at_rps - search.capacity_rps)
    assert brackets == sorted(brackets, reverse=True) and brackets[-1] < brackets[0]
