"""The knee is the endpoint's, not the search's path: the same endpoint gives the same knee (within one
granule) whether the search saturated first or broke an SLO first, or the verdict says it is uncertain."""

from __future__ import annotations

import random

import pytest

from sm_locust.measure.steady import measure_step
from sm_locust.measure.timeline import Second
from sm_locust.plateau.conditions import LatencySLO
from sm_locust.plateau.driver import SearchDriver
from sm_locust.plateau.search import PlateauSearch, StepSearch, Verdict
from sm_locust.plateau.synthetic import SyntheticEndpoint, synthetic_step
from tests.plateau.feed import feed


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
    # a load not measured may be the knee if Little's law lets it reach 95 % of the capacity's low end:
    # at most 32.9 req/s per user (4 users' best), so from 6 users on (5 x 32.9 < 190)
    assert verdict.knee_loads == (6.0, 16.0)
    assert verdict.knee_uncertain == "uncertain: 6 to 16 users"
    assert "at 16 users, p95 20 ms (uncertain: 6 to 16 users)" in verdict.text(), verdict.text()
    # a measured load just short of the floor whose interval reaches it: the loads below it cannot
    search = PlateauSearch(1, 64)
    search.first()
    for i, (load, counts) in enumerate({1: [38, 39], 4: [150, 170], 5: [170, 171], 10: [170, 171]}.items()):
        search._pending = float(load)
        search.feed(measure_step(seconds_of(load, counts, t0=20.0 * i), warmup_fraction=0.0, min_subwindow_s=1))
    low, high = search.verdict().knee_loads
    assert low >= 4 and high == 5, search.verdict().knee_loads  # not 2: 2 or 3 users reach at most 117 req/s
    assert Verdict(None, True, "throughput", "", "", knee_loads=(5.0, 6.0)).knee_uncertain is None  # one granule
    steps = StepSearch(4, 4, 64)  # a linear search's granule is its step
    steps.first()
    for i, (load, counts) in enumerate({4: [130, 131], 8: [200, 201], 12: [201, 200]}.items()):
        steps.feed(measure_step(seconds_of(load, counts, t0=20.0 * i), warmup_fraction=0.0, min_subwindow_s=1))
    assert steps.verdict().knee_loads == (8.0, 8.0) and steps.verdict().knee_uncertain is None


class StraddlingEndpoint:
    """Linear to 8 users at 12.5 req/s each, 100 req/s flat beyond; each second's slow tail (10 % of its
    requests) at 10 ms per user, -25 % or +25 % at random each second: a p95 SLO of 130 ms is met up to
    8 users, straddled at 12 and 16 for as long as they run, broken from 20 on."""

    def __init__(self, seed=1):
        self.clock = 1_700_000_000.0
        self.rng = random.Random(seed)

    def users_step(self, users, seconds=1, ramp_s=0):
        out = []
        for i in range(ramp_s + seconds):
            self.clock += 1.0
            n = round(min(12.5 * users, 100.0)) if i >= ramp_s else 0
            tail = round(10.0 * users * self.rng.choice((0.75, 1.25)))
            out.append(Second(t=self.clock, users=users, spawning=i < ramp_s, requests=n, failures=0,
                              hist={10: n - n // 10, tail: n // 10} if n else {}))
        return out


def test_a_step_straddling_its_slo_for_the_whole_budget_is_bounded_and_said():
    driver = SearchDriver(PlateauSearch(1, 64, conditions=[LatencySLO(95, 130)]), step_s=30, min_step_s=10,
                          min_subwindow_s=1)
    feed(driver, StraddlingEndpoint(), limit=2000)
    verdict = driver.search.verdict()
    held = [(m.load, m.t_end - m.t_start) for m in driver.measurements]
    assert all(seconds <= 30 + 1 for _, seconds in held), held  # never past the budget
    straddled = [m for m in driver.measurements if 8 < m.load < 20]
    assert straddled, held
    # a straddling step held to its budget only while its SLO could still move the knee or capacity:
    # past saturation (flat over the acceptable load below it) it ends at the minimum
    late = [m for m in straddled if any(a.load < m.load and a.goodput_rps >= 99 and not a.undecided
                                        for a in driver.measurements[:driver.measurements.index(m)])]
    assert all(m.t_end - m.t_start < 30 for m in late), held
    assert verdict.plateau.load == 8 and verdict.reached, (held, verdict.text())  # the knee placed below it
    assert not verdict.inconclusive, verdict.text()


def straddling_step(users, rps, seed=2):
    source = StraddlingEndpoint(seed)
    seconds = source.users_step(users, 24)
    for second in seconds:
        factor = rps / 100.0
        second.requests = round(second.requests * factor)
        second.hist = {k: round(v * factor) for k, v in second.hist.items()}
    return measure_step(seconds, warmup_fraction=0.0, min_subwindow_s=1)


def test_an_slo_straddled_past_saturation_does_not_hold_the_step():
    search = PlateauSearch(4, 64, conditions=[LatencySLO(95, 130)])
    search.first()
    search.feed(straddling_step(8, 100))  # met: p95 at most 100 ms
    search._pending = 16.0
    flat, growing = straddling_step(16, 100), straddling_step(16, 130)
    assert LatencySLO(95, 130).undecided(flat) and LatencySLO(95, 130).undecided(growing)  # both straddle
    assert not any("SLO" in r for r in search.undecided(flat))  # saturated at 8: its side moves nothing
    assert any("straddles SLO 130 ms" in r for r in search.undecided(growing))  # it may bound the capacity
    assert search._violation(flat).startswith("undecided: ")  # either way it is not acceptable


def test_a_linear_search_judges_a_straddled_slo_the_same_way():
    search = StepSearch(8, 8, 64, conditions=[LatencySLO(95, 130)])
    search.first()
    search.feed(straddling_step(8, 100))
    assert not any("SLO" in r for r in search.undecided(straddling_step(16, 100)))
    assert any("straddles SLO 130 ms" in r for r in search.undecided(straddling_step(16, 130)))


def test_a_constraints_boundary_on_a_noisy_plateau_still_leaves_the_knee_refined():
    # a quiet README run: 4 users 154 req/s, 16 users 170 breaking the 100-ms SLO, bisected to 10 (met)
    # and 11 (broken); 10 -> 11 read +3.6 % with +-6 % steps, not surely flat, so the knee was left at
    # 10 with nothing measured between 4 and 10, though 5 users reach the plateau by Little's law
    steady, wobble = [1.01, 0.99] * 6, [1.1, 0.9, 1.05, 0.95, 1.12, 0.88] * 2
    tilt = {10: 0.98, 11: 1.02, 12: 1.04, 13: 1.03}

    def measure(load, i):
        rps = min(38.0 * load, 170.0) * tilt.get(int(load), 1.0)
        p95 = 9.6 * load
        counts = [round(rps * w) for w in (wobble if 8 <= load <= 13 else steady)]
        hists = [{10: c - c // 10, round(p95): c // 10} for c in counts]
        seconds = [Second(t=20.0 * i + j + 1, users=int(load), spawning=False, requests=c, failures=0, hist=h)
                   for j, (c, h) in enumerate(zip(counts, hists, strict=True))]
        return measure_step(seconds, warmup_fraction=0.0, min_subwindow_s=1)

    search = PlateauSearch(1, 256, conditions=[LatencySLO(95, 100)])
    decision, loads = search.first(), []
    while not decision.stop:
        loads.append(decision.load)
        decision = search.feed(measure(decision.load, len(loads)))
        assert len(loads) < 30, loads
    verdict = search.verdict()
    assert 10 in loads and 11 in loads, loads  # the SLO's boundary was refined
    assert verdict.plateau.load in (5, 6) and verdict.knee_uncertain is None, (loads, verdict.text())


def test_a_saturation_undone_by_a_re_measure_refines_the_knee_instead_of_stopping():
    # with hogs: 4 users read 177.8 (±8.1), 16 users 185.3 (+4.2 %, straddling 5 %): saturated on its
    # point, so 4 users were measured again and read 167.0: +11 %, no boundary left. The search
    # stopped there ("no boundary") with nothing measured between 4 and 16.
    reads = {1: [44], 4: [178, 167], 16: [185], 3: [132]}
    seen: dict[int, int] = {}

    def measure(load, i):
        load = int(load)
        values = reads.get(load) or [min(44.0 * load, 185.0)]
        rps = values[min(seen.get(load, 0), len(values) - 1)]
        seen[load] = seen.get(load, 0) + 1
        wobble = [1.05, 0.95] * 6 if load == 4 and seen[load] == 1 else [1.005, 0.995] * 6
        counts = [round(rps * w) for w in wobble]
        return measure_step([Second(t=20.0 * i + j + 1, users=load, spawning=False, requests=c, failures=0,
                                    hist={20: c}) for j, c in enumerate(counts)],
                            warmup_fraction=0.0, min_subwindow_s=1)

    search = PlateauSearch(1, 256)
    decision, loads = search.first(), []
    while not decision.stop:
        loads.append(decision.load)
        decision = search.feed(measure(decision.load, len(loads)))
        assert len(loads) < 30, loads
    verdict = search.verdict()
    assert decision.reason != "no boundary", loads
    assert any(4 < load < 16 for load in loads), loads
    assert verdict.reached and verdict.knee_uncertain is None, (loads, verdict.text())


def test_the_knee_is_uncertain_only_where_a_load_further_below_it_may_be_the_knee():
    # the 400 req/s bench profile: knee 39 users read 375.6 [365.0, 386.3] beside a capacity of 390.8
    # [387.2, 394.3]; 38 users may reach the 95 % line, 37 by Little's law, 64 surely is. Another run
    # would put the knee at 37-39: within the search's resolution there (5 % of 39: 2 users).
    knee = synthetic_step(39, 375.6)
    close = Verdict(knee, True, "throughput", "", "", knee_loads=(37.0, 64.0), knee_granule=2.0)
    assert close.knee_uncertain is None
    assert Verdict(knee, True, "throughput", "", "", knee_loads=(30.0, 64.0), knee_granule=2.0).knee_uncertain \
        == "uncertain: 30 to 39 users"
    search = PlateauSearch(1, 256)
    assert (search._resolution(39), search._resolution(5), search._resolution(16)) == (2, 1.0, 1)


def test_an_unstable_step_does_not_place_the_knee_while_a_stable_one_reaches_the_plateau():
    # CI's steps: 5 users read 88.2 req/s but unstable, 8 users 90.7 stable, 6 users 90.0 stable; the
    # knee (summary.json knee_step, quoted by every surface) is the least load *stably* on the plateau
    steps = [synthetic_step(1, 22.0), synthetic_step(4, 80.0), synthetic_step(8, 90.7),
             synthetic_step(6, 90.0), synthetic_step(5, 88.2, stable=False)]
    assert PlateauSearch.plateau_of(steps).load == 6
    # with every step on the plateau unstable, the least such load is still the knee (flagged by its record)
    shaky = [synthetic_step(m.load, m.goodput_rps, stable=m.load < 5) for m in steps]
    assert PlateauSearch.plateau_of(shaky).load == 5
    # a stable step below the plateau's floor is not the knee
    assert PlateauSearch.plateau_of([synthetic_step(4, 80.0), synthetic_step(5, 88.2, stable=False)]).load == 5


def search_at_budget(reads, wobbles):
    """Run a PlateauSearch on per-load reads (req/s, each second's factor cycling through its wobble), each
    step recording what it left undecided as the driver does at the step budget."""
    def measure(load, i):
        counts = [round(reads[int(load)] * w) for w in wobbles.get(int(load), [1.005, 0.995]) * 6]
        return measure_step([Second(t=20.0 * i + j + 1, users=int(load), spawning=False, requests=c, failures=0,
                                    hist={20: c}) for j, c in enumerate(counts)],
                            warmup_fraction=0.0, min_subwindow_s=1)

    search = PlateauSearch(1, 256)
    decision, loads = search.first(), []
    while not decision.stop:
        loads.append(decision.load)
        step = measure(decision.load, len(loads))
        step.undecided = search.undecided(step)  # held to its budget: what it still could not decide
        decision = search.feed(step)
        assert len(loads) < 30, loads
    return loads, search.verdict()


# 1, 4, 16 (linear: x4), 32 (flat: saturated), then Little's law's 5 users: 97 req/s (+-2.8 %), whose gain to
# 32 users' 100 (+-0.3 %) straddles 5 % for its whole budget; the capacity is 32 users' narrow interval
KNEE_SIDE = {1: 22.5, 4: 91.0, 5: 97.0, 16: 96.0, 18: 99.0, 32: 100.0}


def test_a_knee_side_gain_left_open_places_the_knee_within_a_granule_and_the_verdict_stands():
    loads, verdict = search_at_budget(KNEE_SIDE, {4: [1.075, 0.925], 5: [1.028, 0.972]})
    assert loads[:5] == [1, 4, 16, 32, 5], loads
    knee = verdict.plateau
    assert knee.load == 5 and any("throughput gain" in r and "straddles 5 %" in r for r in knee.undecided)
    capacity = verdict.capacity
    assert capacity.load == 32 and capacity.goodput_ci.half_width < 0.01 * capacity.goodput_rps
    # the capacity and the saturation stand; what is open is whether the knee is 4 or 5 users
    assert verdict.reached and not verdict.inconclusive and verdict.undecided == [], verdict.text()
    assert verdict.knee_loads == (4.0, 5.0)  # one granule, holding the knee
    assert verdict.knee_undecided == [f"5 users still undecided at its step budget: {knee.undecided[0]}"]
    assert f"at 5 users, p95 20 ms (uncertain: 4 to 5 users, the knee only: 5 users still undecided at its step " \
           f"budget: {knee.undecided[0]})" in verdict.text(), verdict.text()
    plateau = verdict.as_dict()
    assert plateau["inconclusive"] is False and plateau["inconclusive_reason"] is None
    assert plateau["knee_loads"] == [4.0, 5.0] and plateau["knee_undecided"] == verdict.knee_undecided
    assert plateau["undecided"] == []


def test_a_knee_side_gain_left_open_over_more_than_a_granule_stays_inconclusive():
    # the same search with 5 users read 96.5: its interval no longer surely reaches 95 % of the capacity's
    # low end, so the least load surely on the plateau is 16 users: the knee is open from 4 to 16 users
    loads, verdict = search_at_budget({**KNEE_SIDE, 5: 96.5}, {4: [1.075, 0.925], 5: [1.028, 0.972]})
    assert verdict.plateau.load == 5 and verdict.knee_loads == (4.0, 16.0), (loads, verdict.knee_loads)
    assert verdict.inconclusive and verdict.knee_undecided == []
    assert verdict.inconclusive_reason.startswith("5 users still undecided at its step budget: throughput gain")


def test_only_a_gain_left_open_beside_the_knee_places_the_knee_alone():
    knee, above, top = synthetic_step(5, 97.0), synthetic_step(6, 99.0), synthetic_step(32, 100.0)
    gain = "throughput gain +3.1 % [+1.1, +5.0] straddles 5 %"
    search = PlateauSearch(1, 64)
    search._by_load = {5.0: knee, 6.0: above, 32.0: top}

    def knee_only(step=knee, reached=True, loads=(5.0, 6.0), capacity=top):
        v = Verdict(knee, reached, "throughput", "", "", capacity=capacity, knee_loads=loads)
        return search._places_knee_only(v, step)

    knee.undecided = [gain]
    assert knee_only() and not knee_only(reached=False)
    knee.undecided = [gain, "p95 101 ms [95, 110] straddles SLO 100 ms"]  # a constraint left open is not the knee's
    assert not knee_only()
    knee.undecided, above.undecided = [], [gain]
    assert knee_only(above)  # the step just above the knee bounds it
    top.undecided = [gain]  # the highest load's gain: whether the endpoint saturated at all
    assert not knee_only(top)
    assert not knee_only(loads=(5.0, 8.0))  # open over 3 users: wider than the resolution at 5 users
    assert not knee_only(loads=(6.0, 7.0))  # an interval that does not hold the knee
    assert not knee_only(capacity=None)


def test_a_gain_still_straddling_after_re_measures_and_splits_is_decided_above_the_highest_load():
    # CI-like run of 4 slots x 40 ms on a busy machine: 1, 4, 16, 3 users, then 4 and 16 measured again
    # (91.1 +-1.9 and 93.9 +-1.2 req/s) and 10 between them (91.0): 16 over 4 still read +3.1 % [+0.6, +5.6],
    # and the search stopped on that point (INCONCLUSIVE) though the knee was placed against the capacity's
    # interval. One step above the highest load (32 users, flat) decides that throughput stopped growing.
    reads = {1: [23.0], 3: [66.6], 4: [91.4, 91.1], 10: [91.0], 16: [93.7, 93.9], 32: [94.0]}
    wobble = {(4, 1): [1.07, 0.93], (4, 2): [1.03, 0.97], (16, 1): [1.04, 0.96], (16, 2): [1.02, 0.98],
              (10, 1): [1.04, 0.96], (32, 1): [1.02, 0.98], (3, 1): [1.04, 0.96]}
    seen: dict[int, int] = {}

    def measure(load, i):
        load = int(load)
        seen[load] = seen.get(load, 0) + 1
        rps = reads[load][min(seen[load], len(reads[load])) - 1]
        counts = [round(rps * w) for w in wobble.get((load, seen[load]), [1.005, 0.995]) * 6]
        return measure_step([Second(t=20.0 * i + j + 1, users=load, spawning=False, requests=c, failures=0,
                                    hist={20: c}) for j, c in enumerate(counts)],
                            warmup_fraction=0.0, min_subwindow_s=1)

    search = PlateauSearch(1, 256)
    decision, loads = search.first(), []
    while not decision.stop:
        loads.append(decision.load)
        step = measure(decision.load, len(loads))
        step.undecided = search.undecided(step)
        decision = search.feed(step)
        assert len(loads) < 30, loads
    verdict = search.verdict()
    assert loads[:7] == [1, 4, 16, 3, 4, 16, 10], loads
    assert loads[7:] == [32], loads  # once, above the highest load
    assert verdict.reached and not verdict.inconclusive, verdict.text()
    assert verdict.plateau.load == 4 and "on its point only" not in verdict.stop_reason, verdict.text()


def test_the_token_verdict_names_a_knee_left_open_too():
    from sm_locust.plateau.tokens import TokenVerdict

    open_knee = ["5 users still undecided at its step budget: throughput gain +3.1 % [+1.1, +5.0] straddles 5 %"]
    verdict = Verdict(synthetic_step(5, 97.0), True, "throughput", "throughput gain < 5 % over 2 steps", "",
                      knee_loads=(4.0, 5.0), knee_undecided=open_knee)
    text = TokenVerdict.of(verdict, 95.0).text()
    assert f"plateau: 5 users (uncertain: 4 to 5 users, the knee only: {open_knee[0]})" in text, text
    assert not TokenVerdict.of(verdict, 95.0).inconclusive
    placed = Verdict(synthetic_step(5, 97.0), True, "throughput", "", "", knee_loads=(4.0, 5.0))
    assert "uncertain" not in TokenVerdict.of(placed, 95.0).text()
