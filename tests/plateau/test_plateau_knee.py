"""The knee is the endpoint's, not the search's path: the same endpoint gives the same knee (within one
granule) whether the search saturated first or broke an SLO first, or the verdict says it is uncertain."""

from __future__ import annotations

import pytest

from sm_locust.plateau.conditions import LatencySLO
from sm_locust.plateau.search import PlateauSearch, StepSearch, Verdict
from sm_locust.plateau.steady import measure_step
from sm_locust.plateau.synthetic import SyntheticEndpoint, synthetic_step
from sm_locust.plateau.timeline import Second


def search_endpoint(search, endpoint, seconds=12):
    """Feed `search` a step of `endpoint` at each load it asks for, with its own window (intervals)."""
    decision, loads = search.first(), []
    while not decision.stop:
        loads.append(decision.load)
        decision = search.feed(measure_step(endpoint.users_step(int(decision.load), seconds), min_subwindow_s=1))
        assert len(loads) < 40, loads
    return loads, search.verdict()


def endpoint(seed=1, noise=0.02):
    # 4 slots x 20 ms, 10 ms outside the slot (a loaded client): 200 req/s, knee at 6 users
    return SyntheticEndpoint(concurrency=4, service_ms=20.0, overhead_ms=10.0, noise=noise, seed=seed)


def test_an_slo_broken_past_saturation_does_not_leave_the_knee_where_growth_jumped():
    # grows 1, 4, 16 (linear: x4), 32 (x2) breaks the SLO: 16 was already on the plateau, yet the knee
    # is near 6. Refining only the SLO's boundary (16..32) placed it at 16.
    loads, bounded = search_endpoint(PlateauSearch(1, 256, conditions=[LatencySLO(95, 150)]), endpoint())
    assert loads[:4] == [1, 4, 16, 32], loads
    _, free = search_endpoint(PlateauSearch(1, 256), endpoint())
    true_knee = endpoint().knee_users()
    assert abs(free.plateau.load - true_knee) <= 1, free.text()
    assert abs(bounded.plateau.load - free.plateau.load) <= 1, (loads, bounded.text())
    assert all(abs(m.load - 24) > 1 for m in bounded.steps)  # the flat SLO boundary was not bisected
    assert bounded.knee_uncertain is None and bounded.reached, bounded.text()


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_the_same_noisy_endpoint_gives_the_same_knee_whichever_the_path(seed):
    knees = []
    for start, slo in ((1, None), (1, 150), (2, 150), (3, None)):
        conditions = [LatencySLO(95, slo)] if slo else []
        _, verdict = search_endpoint(PlateauSearch(start, 256, conditions=conditions), endpoint(seed, noise=0.05))
        knees.append(verdict.plateau.load if verdict.knee_uncertain is None else None)
    placed = [k for k in knees if k is not None]
    assert placed and max(placed) - min(placed) <= 1, knees  # the same knee, or said uncertain


def test_an_slo_boundary_refined_first_is_followed_by_the_knee_below_it():
    # throughput reads +7.5 % from 18 users on: the SLO's boundary may bound the capacity, so it is
    # refined; it lies just above 16 users (p95 104 ms there, 110 at 17), so no step past 16 is
    # acceptable and nothing says saturated: the knee left at 16 is then refined below it
    def rps(load):
        return 215.0 if load >= 18 else min(load * 33.0, 200.0)

    def measure(load):
        return synthetic_step(load, rps(load), p95_ms=load / rps(load) * 1300.0)

    search = PlateauSearch(1, 256, conditions=[LatencySLO(95, 105)])
    decision, loads = search.first(), []
    while not decision.stop:
        loads.append(decision.load)
        decision = search.feed(measure(decision.load))
    verdict = search.verdict()
    assert 17 in loads, loads
    first_knee_step = next(i for i, load in enumerate(loads) if 4 < load < 16)
    assert any(16 < load < 32 for load in loads[:first_knee_step]), loads  # the SLO's boundary first
    assert verdict.plateau.load == 6, (loads, verdict.text())  # 6 x 33 = 198, within 5 % of 200


def test_the_knee_is_a_constraints_last_load_while_throughput_still_grows():
    def measure(load):  # linear to 64 users, p95 = 20 + 3 u^2 ms: the SLO binds, no knee below it
        return synthetic_step(load, 100 * load, p95_ms=20 + 3 * load * load)

    search = PlateauSearch(1, 64, conditions=[LatencySLO(95, 200)])
    decision, loads = search.first(), []
    while not decision.stop:
        loads.append(decision.load)
        decision = search.feed(measure(decision.load))
    assert search.knee_bracket() is None and search.verdict().plateau.load == 7, loads


def seconds_of(users, per_second, n=12, t0=0.0):
    return [Second(t=t0 + i + 1, users=users, spawning=False, requests=c, failures=0, hist={20: c})
            for i, c in enumerate(per_second * (n // len(per_second)))]


def test_knee_loads_count_unmeasured_loads_and_a_wide_one_is_said_uncertain():
    # measured: 4 users surely short of the plateau, 16 and 20 on it; nothing between 4 and 16
    search = PlateauSearch(4, 64)
    search.first()
    for i, (load, counts) in enumerate({4: [130, 131], 16: [200, 201], 20: [201, 200]}.items()):
        search._pending = float(load)  # the loads a search could have taken (no refinement here)
        search.feed(measure_step(seconds_of(load, counts, t0=20.0 * i), warmup_fraction=0.0, min_subwindow_s=1))
    verdict = search.verdict()
    assert verdict.reached and verdict.plateau.load == 16
    assert verdict.knee_loads == (5.0, 16.0)  # any load from one granule above 4 may be the knee
    assert verdict.knee_uncertain == "uncertain: 5 to 16 users"
    assert "at 16 users, p95 20 ms (uncertain: 5 to 16 users)" in verdict.text(), verdict.text()
    assert Verdict(None, True, "throughput", "", "", knee_loads=(5.0, 6.0)).knee_uncertain is None  # one granule
    steps = StepSearch(4, 4, 64)  # a linear search's granule is its step
    steps.first()
    for i, (load, counts) in enumerate({4: [130, 131], 8: [200, 201], 12: [201, 200]}.items()):
        steps.feed(measure_step(seconds_of(load, counts, t0=20.0 * i), warmup_fraction=0.0, min_subwindow_s=1))
    assert steps.verdict().knee_loads == (8.0, 8.0) and steps.verdict().knee_uncertain is None
