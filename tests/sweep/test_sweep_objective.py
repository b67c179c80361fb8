"""Objective, ranking, recommendation and Pareto front as pure functions over synthetic figures."""

from __future__ import annotations

import pytest

from sm_locust.sweep.costing import Price, cost_intervals, estimate, figures
from sm_locust.sweep.objective import Objective, pareto_front
from sm_locust.sweep.realtime.rank import Candidate, disqualification, rank, recommend

OBJECTIVE = Objective(target_rps=100, slo_ms=400, percentile=95, safety_factor=1.0)  # no headroom: the formulas


def priced(index, label, capacity, latency, price=0.2, error_rate=0.0, count=1, objective=OBJECTIVE, **kw):
    """A measured candidate: capacity known within 1 %, latency within 5 % (narrow enough to separate
    the figures these tests compare; the ties have their own tests)."""
    cost = Price(price, "test", None, count)
    ci = [capacity * 0.99, capacity * 1.01]
    f = {**figures(capacity, cost, objective), **cost_intervals(ci, cost, objective)}
    kw.setdefault("latency_ci95", [latency * 0.95, latency * 1.05])
    return Candidate(index, label, capacity_rps=capacity, capacity_ci95=ci, latency_ms=latency, error_rate=error_rate,
                     **f, **kw)


def test_cost_figures_follow_the_report_formulas():
    f = figures(121.0, Price(0.2, "x", None, 1), OBJECTIVE)
    assert f["cost_per_1m"] == pytest.approx(0.2 / (121 * 3600) * 1e6)
    assert f["instances_needed"] == 1 and f["cost_per_hour_at_target"] == pytest.approx(0.2)
    two = figures(48.0, Price(0.2, "x", None, 1), OBJECTIVE)
    assert two["instances_needed"] == 3 and two["cost_per_hour_at_target"] == pytest.approx(0.6)
    fleet = figures(200.0, Price(0.4, "x", None, 2), OBJECTIVE)  # measured on 2 instances: 100 req/s each
    assert fleet["instances_needed"] == 1 and fleet["cost_per_1m"] == pytest.approx(0.8 / (200 * 3600) * 1e6)
    half = figures(121.0, Price(0.2, "x", None, 1), Objective(target_rps=100, safety_factor=0.5))
    assert half["instances_needed"] == 2


def test_the_sweeps_safety_factor_default_is_the_reports():
    from sm_locust.report.cost import DEFAULT_SAFETY_FACTOR
    from sm_locust.report.pipeline import ReportOptions

    assert Objective().safety_factor == ReportOptions().safety_factor == DEFAULT_SAFETY_FACTOR == 0.5
    assert figures(121.0, Price(0.2, "x", None, 1), Objective(target_rps=100))["instances_needed"] == 2


def test_disqualification_names_the_figure():
    assert disqualification(priced(1, "a", 100, 450), OBJECTIVE) == "p95 450 ms (±22) at the knee > SLO 400 ms"
    # the SLO is judged on the knee's interval, as a gate judges it: one that straddles it is undecided, never a pass
    straddles = priced(1, "a", 100, 390)
    straddles.latency_ci95 = [370.0, 430.0]
    assert disqualification(straddles, OBJECTIVE) == \
        "p95 390 ms [370, 430] at the knee straddles the SLO 400 ms: undecided (measure the knee longer)"
    above = priced(1, "a", 100, 410)
    above.latency_ci95 = [370.0, 430.0]
    assert "straddles" in disqualification(above, OBJECTIVE)  # a point above, not surely above: undecided too
    clear = priced(1, "a", 100, 380)
    clear.latency_ci95 = [360.0, 399.0]
    assert disqualification(clear, OBJECTIVE) is None
    assert disqualification(priced(1, "a", 100, 40, error_rate=0.03), OBJECTIVE) == "error rate 3 % at the knee > 1 %"
    assert disqualification(Candidate(1, "a", status="failed", reason="CreateEndpoint: ResourceLimitExceeded: quota"),
                            OBJECTIVE) == "failed: CreateEndpoint: ResourceLimitExceeded: quota"
    no_step = Candidate(1, "a", no_capacity_reason="no acceptable step: p95 500 ms")
    assert "no acceptable step" in disqualification(no_step, OBJECTIVE)
    assert disqualification(priced(1, "a", 100, 40), OBJECTIVE) is None


def test_the_cheapest_fleet_for_the_target_wins_and_the_sentence_says_by_how_much():
    low = priced(1, "max_concurrency 2", 48.0, 45.0)
    high = priced(2, "max_concurrency 5", 121.0, 44.0)
    rec = recommend([low, high], OBJECTIVE)
    assert rec.winner is high
    assert rec.reason == ("max_concurrency 5: 121 req/s (±1), p95 44 ms (±2); 1 instance for 100 req/s; "
                          "$0.46 (±0.005) per 1M — 67 % cheaper at 100 req/s than max_concurrency 2")
    assert rec.lost[1] == "3 instances for 100 req/s cost $0.60/h vs $0.20/h"


def test_same_fleet_cost_is_decided_by_cost_per_million_then_latency():
    a = priced(1, "a", 110.0, 60.0)
    b = priced(2, "b", 150.0, 80.0)
    rec = recommend([a, b], OBJECTIVE)
    assert rec.winner is b  # one instance each (the same fleet: a tie, said so); b has more headroom
    assert rec.reason.endswith("it TIES with a on $ per hour at 100 req/s (95 % intervals overlap: a $0.20 "
                               "vs b $0.20): $ per 1M decides (b $0.37 (±0.004) vs a $0.51 (±0.01))")
    assert rec.lost[1] == "ties with b on $ per hour at 100 req/s; $ per 1M $0.51 (±0.01) vs $0.37 (±0.004)"


def test_a_cheaper_instance_type_beats_a_faster_one():
    small = priced(1, "instance_type ml.c5.xlarge", 120.0, 50.0, price=0.204)
    big = priced(2, "instance_type ml.c5.2xlarge", 200.0, 30.0, price=0.408)
    assert rank([big, small], OBJECTIVE)[0] is small


def test_slo_violators_and_failures_lose_with_their_reason():
    fast_cheap = priced(1, "a", 300.0, 450.0)
    ok = priced(2, "b", 120.0, 100.0)
    failed = Candidate(3, "c", status="failed", reason="endpoint x Failed: image not found")
    rec = recommend([fast_cheap, ok, failed], OBJECTIVE)
    assert rec.winner is ok
    assert rec.reason.endswith("— the only configuration that meets the objective")
    assert rec.lost == {1: "p95 450 ms (±22) at the knee > SLO 400 ms", 3: "failed: endpoint x Failed: image not found"}


def test_no_configuration_meets_the_objective():
    rec = recommend([priced(1, "a", 50.0, 900.0)], OBJECTIVE)
    assert rec.winner is None
    assert rec.reason.startswith("no configuration meets the objective (a: p95 900 ms")


def test_without_prices_the_ranking_is_by_throughput():
    objective = Objective(slo_ms=400)
    a = Candidate(1, "a", capacity_rps=80.0, capacity_ci95=[78.0, 82.0], latency_ms=30.0, error_rate=0.0)
    b = Candidate(2, "b", capacity_rps=100.0, capacity_ci95=[97.0, 103.0], latency_ms=60.0, error_rate=0.0)
    rec = recommend([a, b], objective)
    assert rec.winner is b
    assert "25 % more throughput than a" in rec.reason and "no prices known" in rec.reason


def test_optimize_latency():
    objective = Objective(slo_ms=400, optimize="latency")
    a = priced(1, "a", 80.0, 30.0, objective=objective)
    b = priced(2, "b", 100.0, 60.0, objective=objective)
    rec = recommend([a, b], objective)
    assert rec.winner is a and "p95 50 % lower than b" in rec.reason
    assert rec.lost[2] == "p95 60 ms (±3) vs 30 ms (±2)"


def test_pareto_front():
    points = [(1, 0.5, 40.0), (2, 0.3, 60.0), (3, 0.6, 50.0), (4, 0.2, 90.0), (5, 0.3, 60.0)]
    assert pareto_front(points) == [4, 2, 5, 1]  # 3 costs more and is slower than 1
    assert pareto_front([]) == []


def test_plan_estimate_arithmetic():
    e = estimate(Price(0.204, "t", "ml.c5.xlarge", 2), deploy_s=480, test_s=300, delete_s=60, wait_s=60)
    assert e.billed_s == 900
    assert e.instance_hours == pytest.approx(2 * 900 / 3600)
    assert e.usd == pytest.approx(0.204 * 0.5)
    assert estimate(Price(None, None, None), deploy_s=1, test_s=1, delete_s=1).usd is None


def test_the_headline_figures_carry_their_intervals():
    # 48 (±4) req/s for a 100-req/s target: 3 instances at 44 or 48 req/s, 2 at 52
    c = priced(1, "max_concurrency 2", 48.0, 45.0)
    c.capacity_ci95 = [44.0, 52.0]
    c.instances_needed_ci95 = cost_intervals(c.capacity_ci95, Price(0.2, "test", None, 1), OBJECTIVE)[
        "instances_needed_ci95"]
    text = recommend([c], OBJECTIVE).reason
    assert text.startswith("max_concurrency 2: 48 req/s (±4), p95 45 ms (±2); 3 [2, 3] instances for 100 req/s; $1.16")


def test_a_configuration_whose_slo_is_undecided_is_named_and_whether_it_could_win_is_said():
    # 48 req/s needs 3 instances for 100 req/s, 121 needs 1: the winner is cheaper beyond the intervals, so the
    # one whose p95 straddles the SLO (380 [300, 460] against 400) would lose anyway; a faster one could win
    ok = priced(2, "b", 121.0, 100.0)
    slow = priced(1, "a", 48.0, 380.0, latency_ci95=[300.0, 460.0])
    rec = recommend([slow, ok], OBJECTIVE)
    assert rec.winner is ok and rec.lost[1].endswith("straddles the SLO 400 ms: undecided (measure the knee longer)")
    assert rec.reason.endswith("— the only configuration known to meet the objective (a's p95 380 ms (±80) "
                               "straddles the SLO 400 ms, but it would lose on $ per hour at 100 req/s anyway: "
                               "$0.60 vs $0.20)"), rec.reason
    fast = priced(1, "a", 250.0, 380.0, latency_ci95=[300.0, 460.0])
    rec = recommend([fast, ok], OBJECTIVE)
    assert rec.winner is ok and rec.reason.endswith(
        "(a's p95 380 ms (±80) straddles the SLO 400 ms: chosen without it, and it could win should it meet "
        "the SLO; measure its knee longer)"), rec.reason
    surely = priced(1, "a", 250.0, 450.0)  # surely over the SLO: nothing more to say of it
    assert recommend([surely, ok], OBJECTIVE).reason.endswith("— the only configuration that meets the objective")
