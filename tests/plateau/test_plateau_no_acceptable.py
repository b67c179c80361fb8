"""A plateau search with no acceptable step says what is known: the capacity is below the lowest load
measured (it surely broke a constraint), or INCONCLUSIVE with the reason; never a plain "ok"."""

from __future__ import annotations

from sm_locust.measure.steady import measure_step
from sm_locust.plateau.conditions import LatencySLO
from sm_locust.plateau.search import BOUND_BELOW, PlateauSearch
from sm_locust.plateau.synthetic import SyntheticEndpoint, synthetic_step
from sm_locust.record.summary import VERDICT_BELOW, VERDICT_INCONCLUSIVE, VERDICT_OK, run_verdict


def run(search: PlateauSearch, step) -> PlateauSearch:
    decision = search.first()
    while not decision.stop:
        decision = search.feed(step(decision.load))
    return search


def status(search: PlateauSearch) -> dict:
    return run_verdict(search.verdict().as_dict(), [])


def test_every_step_surely_breaking_the_slo_puts_the_capacity_below_the_lowest_load():
    slow = SyntheticEndpoint(concurrency=4, service_ms=200.0, noise=0.05)  # 200 ms a request, SLO 50 ms
    search = run(PlateauSearch(1, 64, conditions=[LatencySLO(95, 50)]),
                 lambda load: measure_step(slow.users_step(int(load), seconds=20), mode="users", load=load))
    verdict = search.verdict()
    assert verdict.plateau is None and verdict.bound == BOUND_BELOW and not verdict.inconclusive
    assert "below the lowest load measured, 1 user" in verdict.text() and "> SLO 50 ms at 1 user" in verdict.text()
    assert status(search) == {"status": VERDICT_BELOW, "reason": verdict.reason}


def test_an_slo_the_lowest_load_cannot_decide_is_inconclusive_not_ok():
    # 1 user: 10 requests, too few for a p95 (it needs 20); 2 users and up surely break the SLO
    search = run(PlateauSearch(1, 64, conditions=[LatencySLO(95, 50)]),
                 lambda load: synthetic_step(load, 0.5, duration_s=20, p95_ms=30) if load == 1
                 else synthetic_step(load, 100, p95_ms=500))
    verdict = search.verdict()
    assert verdict.plateau is None and verdict.inconclusive and verdict.bound != BOUND_BELOW
    assert verdict.inconclusive_reason.startswith("no load surely met the constraints: p95") and "at 1 user" in \
        verdict.inconclusive_reason
    assert status(search)["status"] == VERDICT_INCONCLUSIVE


def test_no_step_measured_on_the_endpoint_is_inconclusive():
    search = PlateauSearch(1, 64, conditions=[LatencySLO(95, 50)])
    search.first()
    search.halt("run time 5 s reached (-t)")
    verdict = search.verdict()
    assert verdict.plateau is None and verdict.inconclusive
    assert verdict.inconclusive_reason == "no step was measured on the endpoint (run time 5 s reached (-t))"
    assert status(search)["status"] == VERDICT_INCONCLUSIVE


def test_an_acceptable_step_keeps_the_ok_verdict():
    fast = SyntheticEndpoint(concurrency=4, service_ms=20.0)
    search = run(PlateauSearch(1, 64, conditions=[LatencySLO(95, 1000)]),
                 lambda load: measure_step(fast.users_step(int(load), seconds=20), mode="users", load=load))
    assert search.verdict().plateau is not None and status(search)["status"] == VERDICT_OK
