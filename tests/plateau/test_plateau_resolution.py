"""The knee is placed to a resolution relative to its load (5 % of it, the refinement tolerance, to the
nearest whole user, at least one), the one the verdict records as `knee_granule`: a knee of 34 users is
placed to within 2 users in a few steps, not walked down to one user at a time; small knees keep theirs.
At the top of the range (2,000 req/s, a knee near 100 users) growth that jumped to the maximum past the
knee measures below it instead of ending there."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest

from sm_locust.plateau.driver import SearchDriver
from sm_locust.plateau.search import PLATEAU_TOLERANCE, PlateauSearch
from sm_locust.plateau.synthetic import SyntheticEndpoint, synthetic_step
from tests.plateau.feed import feed

# the plateau shape's defaults: a step ends from 10 s on once decided, at the latest at 30 s
MIN_STEP_S, STEP_S = 10, 30


def run(endpoint: SyntheticEndpoint, search: PlateauSearch | None = None):
    """The search driven against `endpoint` one second at a time, as the plateau shape drives it."""
    driver = SearchDriver(search or PlateauSearch(1, 256), step_s=STEP_S, min_step_s=MIN_STEP_S, min_subwindow_s=1)
    feed(driver, endpoint, limit=2000)
    return [int(m.load) for m in driver.search.steps], driver.search.verdict()


def true_knee(endpoint: SyntheticEndpoint) -> int:
    """The least whole load whose noiseless throughput is within the tolerance of the capacity."""
    ceiling = max(endpoint.throughput(n) for n in range(1, 513))
    return next(n for n in range(1, 513) if endpoint.throughput(n) >= (1.0 - PLATEAU_TOLERANCE) * ceiling)


@dataclass
class MeasuredEndpoint(SyntheticEndpoint):
    """The local endpoint of 32 slots x 20 ms as docs/plateau.md measured it at 1,500 req/s (two runs):
    users -> goodput. Up to 32 users it is not linear: 32 users cycled 27-29 ms where 34 cycled 23 ms, so
    Little's law from the 32-user step puts the knee at ~41 users; it is at 34."""

    anchors: tuple[tuple[float, float], ...] = ((1, 46.0), (4, 180.0), (16, 658.0), (32, 1130.0), (33, 1345.0),
                                                (34, 1495.0), (36, 1504.0), (37, 1513.0), (512, 1513.0))

    def throughput(self, users: float) -> float:
        for (a, x), (b, y) in itertools.pairwise(self.anchors):
            if a <= users <= b:
                return x + (y - x) * (users - a) / (b - a)
        return self.anchors[-1][1]


def test_the_resolution_is_five_per_cent_of_the_load_to_the_nearest_user_and_one_definition():
    search = PlateauSearch(1, 256)
    assert [search._resolution(n) for n in (1, 5, 16, 29, 30, 34, 39, 41, 49, 50, 100)] == \
        [1, 1, 1, 1, 2, 2, 2, 2, 2, 3, 5]
    # the bracket that ends the refinement and the confirmation step use the same resolution
    assert search._narrow(32, 34) and not search._narrow(32, 35) and search._narrow(47, 50)
    assert search._below(34) == 32 and search._below(39) == 37 and search._below(6) == 5
    rates = PlateauSearch(10, 1000, mode="rate")
    assert rates._resolution(400) == pytest.approx(20.0) and rates._narrow(380, 400)


def test_the_knees_bracket_below_a_constraint_is_closed_once_within_the_resolution():
    # 20 users short of the plateau, 40 on it: Little's law (at most 34.2 req/s per user) lets no load
    # under 39 reach 95 % of the level (1,370 req/s), so the knee is 39 or 40: within 2 users (5 % of 40)
    def bracket(per_user_at_10):
        search = PlateauSearch(1, 256)
        search.first()
        for load, rps in ((10, 10 * per_user_at_10), (20, 680.0), (40, 1340.0), (80, 1400.0)):
            search._pending = float(load)  # the loads a search could have taken
            search.feed(synthetic_step(load, rps))
        return search.knee_bracket()

    assert bracket(34.2) is None
    assert bracket(36.95) == (20.0, 40.0)  # from 36 users on: wider than the resolution, refined


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_a_32_slot_endpoint_places_its_knee_within_a_granule_in_at_most_8_steps(seed):
    # 32 slots x 20 ms, 1 ms outside the slot: 1,600 req/s, knee ~32 users. 1, 4, 16, 64 (x4 while linear),
    # 128 (x2: flat), then the model's knee and the load one granule below it: 7 steps; one more for a
    # step the noise made re-measured: 8 steps, 80 s at the 10-s minimum (the 90-s goal)
    endpoint = SyntheticEndpoint(concurrency=32, service_ms=20.0, overhead_ms=1.0, noise=0.02, seed=seed)
    loads, verdict = run(endpoint)
    knee = true_knee(SyntheticEndpoint(concurrency=32, service_ms=20.0, overhead_ms=1.0))
    assert len(loads) <= 8, loads
    assert verdict.reached and not verdict.inconclusive, verdict.text()
    assert verdict.knee_granule == 2 and abs(verdict.plateau.load - knee) <= verdict.knee_granule, (loads, knee)
    assert verdict.as_dict()["knee_granule"] == verdict.knee_granule  # summary.json records it


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_a_knee_below_the_model_is_bisected_to_its_granule_not_walked_down_one_user_at_a_time(seed):
    # The 1,500 req/s runs: the model's 41 users is on the plateau, and so was every load confirming it
    # from one user below (41, 39, 38, 35, 34, 33: 12-13 steps, 122-133 s). A plateau starting more than a
    # granule below the model's load says the slow 32-user step misled it: bisect to 2 users (5 % of 34).
    # The first knee step is placed halfway between the unqueued cycle's knee (32) and the slow step's
    # (41): 37, then 34, where 41, 36-37, 34 took a step more.
    endpoint = MeasuredEndpoint(concurrency=32, service_ms=20.0, noise=0.02, seed=seed)
    loads, verdict = run(endpoint)
    grown = loads.index(128) + 1  # 1, 4, 16, 32, 64, 128: the 32-user step is bent, so x2 from 16
    assert loads[:grown] == [1, 4, 16, 32, 64, 128], loads
    assert 36 <= loads[grown] <= 38, loads
    assert len(loads) - grown <= 2 and len(loads) <= 8, loads  # 80 s at the 10-s minimum
    assert verdict.reached and not verdict.inconclusive, verdict.text()
    assert verdict.knee_granule == 2
    assert 0 <= verdict.plateau.load - true_knee(endpoint) <= verdict.knee_granule, (loads, verdict.text())
    assert verdict.knee_uncertain is None, verdict.text()


@pytest.mark.parametrize("concurrency,knee", [(2, 2), (6, 6)])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_small_endpoints_keep_their_knee_to_one_user(concurrency, knee, seed):
    # 2 and 6 slots x 40 ms (the 50 and 150 req/s bench profiles): the resolution there is one user
    endpoint = SyntheticEndpoint(concurrency=concurrency, service_ms=40.0, overhead_ms=2.0, noise=0.02, seed=seed)
    loads, verdict = run(endpoint)
    assert true_knee(SyntheticEndpoint(concurrency=concurrency, service_ms=40.0, overhead_ms=2.0)) == knee
    assert verdict.plateau.load == knee and verdict.knee_granule == 1, (loads, verdict.text())
    assert verdict.reached and not verdict.inconclusive, verdict.text()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_maximum_that_queued_is_not_the_end_of_growth_the_knee_below_it_is_found(seed):
    # 100 slots x 50 ms (2,000 req/s, the top of the 75-2,000 req/s range), knee ~99 users: x4 from 64
    # users (linear) jumps to the maximum, 256, which queued (128 ms cycles against 52 ms) and read 56 % more
    # than 64. That stopped the search: "no plateau reached". 128, between them, shows throughput flat from
    # there; the model then places the knee (to 5 users: 5 % of 100): 8 steps, one more for noise.
    endpoint = SyntheticEndpoint(concurrency=100, service_ms=50.0, overhead_ms=2.0, noise=0.02, seed=seed)
    loads, verdict = run(endpoint)
    assert loads[:6] == [1, 4, 16, 64, 256, 128], loads
    assert verdict.reached and verdict.bound == "throughput" and not verdict.inconclusive, verdict.text()
    assert len(loads) <= 9, loads
    knee = true_knee(SyntheticEndpoint(concurrency=100, service_ms=50.0, overhead_ms=2.0))
    assert verdict.knee_granule == 5 and abs(verdict.plateau.load - knee) <= verdict.knee_granule, (loads, knee)


def test_a_maximum_still_on_the_linear_bound_ends_the_search_as_before():
    # 300 slots x 50 ms: the knee (~312 users) is beyond the maximum; 256 users still follow Little's law
    # with no queueing, so nothing between 64 and 256 is measured: no plateau reached, said so
    loads, verdict = run(SyntheticEndpoint(concurrency=300, service_ms=50.0, overhead_ms=2.0, noise=0.02, seed=1))
    assert loads == [1, 4, 16, 64, 256], loads
    assert not verdict.reached and verdict.bound == "limit", verdict.text()
    assert verdict.text().startswith("no plateau reached (reached max users 256"), verdict.text()


def _fed(series):
    """A search fed `series` ((users, req/s), in the order it asks for them); the last decision."""
    search = PlateauSearch(1, 256)
    decision = search.first()
    for load, rps in series:
        assert decision.users == load, (decision, load)
        decision = search.feed(synthetic_step(load, rps))
    return decision


def test_a_step_that_read_slow_below_the_knee_places_the_knee_halfway_to_the_unqueued_model():
    # 32 users cycled 28 ms against 22 unqueued, yet the unqueued cycle puts the knee (33.4 users) above
    # them: the knee lies between 32 (the fewest users that can reach 95 % of 1,512 req/s) and 41 (the
    # 28-ms cycle's): 37 first, not 41
    decision = _fed([(1, 46.0), (4, 180.0), (16, 658.0), (32, 1130.0), (64, 1510.0), (128, 1513.0)])
    assert decision.load == 37 and "halfway to the 32 the unqueued cycle allows" in decision.reason, decision


def test_a_soft_knee_keeps_the_queued_steps_cycle():
    # 64 users cycled 38 ms against 21 unqueued and the unqueued cycle puts the knee at ~50 users, under
    # them, yet they read 1,700 req/s, short of 2,325: the endpoint queues for real there (its capacity
    # rises with concurrency); the knee is placed from 64's cycle (84 users), not halfway to 48
    decision = _fed([(1, 47.0), (4, 188.0), (16, 700.0), (32, 1250.0), (64, 1700.0), (128, 2300.0),
                     (256, 2350.0)])
    assert decision.load == 84 and "halfway" not in decision.reason, decision
