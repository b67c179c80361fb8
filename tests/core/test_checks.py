"""The end-of-run checks of `sm-locust run` (core/checks.py), on synthetic summary.json content:
one check per limit given, judged at the verdict's step for a search and on the whole run otherwise,
STOP for the stop condition that ended the run, and the closing block's wording."""

from __future__ import annotations

from sm_locust.config.options import parse_options
from sm_locust.core.checks import FAIL, INCONCLUSIVE, NOT_JUDGED, PASS, STOP, checks_lines, percentile_key, run_checks
from sm_locust.gates.decide import Bounds, judge
from sm_locust.record.model import Step, Verdict, Workers
from sm_locust.record.summary import lost_worker_verdict


def step(users, **figures):
    return {"users": users, "start": "2026-01-01T00:00:00.000Z", "end": "2026-01-01T00:00:10.000Z",
            "p50_ms": 20.0, "p95_ms": 40.0, "p99_ms": 60.0, "p99_9_ms": 90.0, "error_rate": 0.0, **figures}


SEARCH = {
    "duration_s": 75.0,
    "totals": {"requests": 9000, "p95_ms": 400.0, "p99_ms": 900.0, "error_rate": 0.2},  # the overloaded steps too
    "steps": [step(1), step(4, p95_ms=48.0, error_rate=0.004, end="2026-01-01T00:01:00.000Z",
                                llm={"ttft_p95_ms": 300.0, "itl_p95_ms": 70.0}),
              step(8, p95_ms=400.0, error_rate=0.2, end="2026-01-01T00:01:10.000Z")],
    "plateau": {"users": 4, "rps": 180.0, "p95_ms": 48.0, "p99_ms": 70.0, "error_rate": 0.004,
                "stop_reason": "reached max users 8"},
    "stop_reason": "reached max users 8",
}


T0_SEARCH = 1767225600.0  # 2026-01-01T00:00:00Z: the search's start


def by_name(checks):
    return {c.name: c for c in checks}


def test_no_limit_given_no_checks():
    assert run_checks(SEARCH, parse_options({})) == []
    assert checks_lines([]) == []


def test_a_search_is_judged_at_the_verdicts_step_not_on_the_whole_run():
    options = parse_options({"latency_slo_ms": 50, "max_error_rate": 0.01})
    checks = by_name(run_checks(SEARCH, options))
    slo = checks["p95 latency <= 50 ms"]
    assert (slo.value, slo.limit, slo.status) == ("48 ms", "50 ms", PASS)  # the whole run's p95 is 400
    assert "4 users" in slo.where
    rate = checks["error rate <= 1 %"]
    assert (rate.value, rate.status) == ("0.40 %", PASS)


def test_the_slo_percentile_picks_the_figure_and_a_breach_fails():
    options = parse_options({"latency_slo_ms": 80, "slo_percentile": "99.9"})
    (check,) = run_checks(SEARCH, options)
    assert percentile_key(99.9) == "p99_9_ms"
    assert (check.name, check.value, check.status) == ("p99.9 latency <= 80 ms", "90 ms", FAIL)


def test_llm_slos_read_the_verdicts_step_token_figures():
    options = parse_options({"ttft_slo_ms": 250, "itl_slo_ms": 100, "stream": "true"})
    checks = by_name(run_checks(SEARCH, options))
    assert (checks["TTFT p95 <= 250 ms"].value, checks["TTFT p95 <= 250 ms"].status) == ("300 ms", FAIL)
    assert (checks["ITL p95 <= 100 ms"].value, checks["ITL p95 <= 100 ms"].status) == ("70 ms", PASS)


def test_a_run_without_a_search_is_judged_whole():
    constant = {"duration_s": 60.0, "totals": {"requests": 600, "p95_ms": 120.0, "error_rate": 0.0}, "steps": [step(2)]}
    (check,) = run_checks(constant, parse_options({"latency_slo_ms": 100}))
    assert (check.value, check.status, check.where) == ("120 ms", FAIL, "whole run")


def test_stop_conditions_say_how_far_the_run_went_and_which_one_ended_it():
    options = parse_options({"max_users": 8, "max_duration": "5m", "max_invocations": 100000})
    checks = by_name(run_checks(SEARCH, options))
    users = checks["users <= 8"]
    assert (users.value, users.status) == ("8", STOP)  # the stop reason names it
    duration = checks["duration <= 300 s"]
    assert (duration.value, duration.status) == ("70 s", PASS)  # the steps' span, first start to last end
    assert checks["requests <= 100000"].status == PASS


def test_a_figure_that_is_not_there_is_not_judged():
    empty = {"totals": {}, "steps": []}
    (check,) = run_checks(empty, parse_options({"latency_slo_ms": 100}))
    assert (check.value, check.status) == ("n/a", NOT_JUDGED)


def test_the_closing_block_counts_the_judged_checks_and_aligns_them():
    options = parse_options({"latency_slo_ms": 45, "max_error_rate": 0.01, "max_users": 8})
    lines = checks_lines(run_checks(SEARCH, options))
    assert lines[0] == "checks: 1 of 2 passed, 1 FAILED"  # STOP is neither
    assert [line.split()[0] for line in lines[1:]] == ["FAIL", "PASS", "STOP"]
    assert len({line.index("(") for line in lines[1:]}) == 1  # the windows line up


def with_interval_at_the_knee(low, high):
    steps = [dict(s) for s in SEARCH["steps"]]
    steps[1] = {**steps[1], "ci95": {"p95_ms": [low, high], "p99_ms": None}}
    return {**SEARCH, "steps": steps}


def test_a_latency_limit_is_judged_on_the_interval_by_the_gates_judge():
    options = parse_options({"latency_slo_ms": 50})
    # p95 48 ms at the knee: the point passes; the interval decides
    for (low, high), status in (((44.0, 49.0), PASS), ((46.0, 53.0), INCONCLUSIVE)):
        (check,) = run_checks(with_interval_at_the_knee(low, high), options)
        assert check.status == status == judge(Bounds.of(48.0, low, high), 50, upper=True).upper()
    (check,) = run_checks(with_interval_at_the_knee(46.0, 53.0), options)
    assert check.value == "48 ms [46, 53]" and "interval straddles the limit" in check.where
    (check,) = run_checks(with_interval_at_the_knee(46.0, 53.0), parse_options({"latency_slo_ms": 45}))
    assert (check.value, check.status) == ("48 ms", FAIL)  # the whole interval is over 45
    lines = checks_lines(run_checks(with_interval_at_the_knee(46.0, 53.0),
                                    parse_options({"latency_slo_ms": 50, "max_error_rate": 0.01})))
    assert lines[0] == "checks: 1 of 2 passed, 1 INCONCLUSIVE"
    assert [line.split()[0] for line in lines[1:]] == ["INCONCLUSIVE", "PASS"]
    assert len({line.index("(") for line in lines[1:]}) == 1


def test_a_whole_run_and_token_limits_read_their_own_intervals():
    constant = {"duration_s": 60.0, "steps": [step(2)],
                "llm": {"ttft_p95_ms": 240.0, "ci95": {"ttft_p95_ms": [200, 260]}},
                "totals": {"requests": 600, "p95_ms": 98.0, "error_rate": 0.0, "ci95": {"p95_ms": [90.0, 104.0]}}}
    checks = by_name(run_checks(constant, parse_options({"latency_slo_ms": 100, "ttft_slo_ms": 250})))
    assert checks["p95 latency <= 100 ms"].status == INCONCLUSIVE
    assert checks["TTFT p95 <= 250 ms"].status == INCONCLUSIVE
    constant["totals"]["ci95"] = {"p95_ms": None}  # recorded as too short for one: the point decides
    (check,) = run_checks(constant, parse_options({"latency_slo_ms": 100}))
    assert (check.value, check.status) == ("98 ms", PASS)


STARVED_STEP = "the load generator waited for a CPU 27 % of the step, 2.1 times as long as it ran (13 %; ...)"
STARVED = f"the load generator was the bottleneck: {STARVED_STEP} at 4 users (measured twice)"


def test_an_inconclusive_run_judges_no_limit_on_its_figures():
    """The run's figures are partly the load generator's: its SLO, error-rate and token checks show the
    figure, n/a and why, never PASS or FAIL; the stop conditions still say how far it went."""
    steps = [dict(s) for s in SEARCH["steps"]]
    steps[1] = {**steps[1], "client_bound": True, "client_bound_reason": STARVED_STEP}
    inconclusive = {**SEARCH, "steps": steps, "verdict": {"status": "inconclusive", "reason": STARVED}}
    options = parse_options({"latency_slo_ms": 50, "max_error_rate": 0.01, "ttft_slo_ms": 250, "stream": "true",
                             "max_users": 8, "max_invocations": 100000})
    checks = run_checks(inconclusive, options)
    decided = by_name(run_checks(SEARCH, options))
    assert [c.name for c in checks] == list(decided)  # the same checks, in the same order
    assert [c.status for c in checks] == [NOT_JUDGED] * 3 + [STOP, PASS]
    for check in checks[:3]:
        assert check.value == decided[check.name].value  # the figure is still shown ...
        assert check.where == "run inconclusive: the load generator was the bottleneck"  # ... and why it is n/a
    assert [decided[c.name].status for c in checks[:3]] == [PASS, PASS, FAIL]  # what they would have read
    lines = checks_lines(checks)
    assert lines[0] == "checks: 1 of 1 passed, 3 n/a (run inconclusive: the load generator was the bottleneck)"
    assert [line.split()[0] for line in lines[1:]] == ["n/a", "n/a", "n/a", "STOP", "PASS"]
    ok = {**SEARCH, "steps": steps, "verdict": {"status": "ok", "reason": None}}  # measured again: fine
    assert run_checks(ok, options) == list(decided.values())  # an ok verdict: judged as before
    # INCONCLUSIVE on the endpoint's own figures (the capacity not known to +-5 % at the step budget):
    # each check's own interval judges them, as on an ok run
    undecided = {**SEARCH, "verdict": {"status": "inconclusive", "reason": "the capacity 1,836.6 at 2 users is not "
                                                                          "known to +-5 % (lengthen --step-seconds)"}}
    assert run_checks(undecided, options) == list(decided.values())



def test_a_run_that_lost_a_worker_before_its_steps_ended_judges_no_limit_on_its_figures():
    """Its steps measured less load than asked: the figure checks are n/a, saying the worker was lost."""
    options = parse_options({"latency_slo_ms": 50, "max_error_rate": 0.01, "max_users": 8})
    decided = by_name(run_checks(SEARCH, options))
    workers = {"expected": 2, "connected": 2, "at_end": 1, "lost": [{"id": "w1", "reason": "missing", "after_s": 9.0}]}
    reason = lost_worker_verdict(Verdict.make(status="ok", reason=None), [Step.from_json(s) for s in SEARCH["steps"]],
                                 Workers.make(**workers), T0_SEARCH).reason
    assert reason is not None
    lost = {**SEARCH, "workers": workers, "verdict": {"status": "inconclusive", "reason": reason}}
    checks = run_checks(lost, options)
    assert [c.status for c in checks] == [NOT_JUDGED, NOT_JUDGED, STOP]
    assert checks[0].where == f"run inconclusive: {reason.split(':')[0]}"
    assert checks[0].where.startswith("run inconclusive: 1 of 2 Locust workers lost (w1 missing 9.0 s into the test)")
    assert [decided[c.name].status for c in checks[:2]] == [PASS, PASS]  # what they would have read
    assert run_checks({**SEARCH, "workers": workers}, options) == list(decided.values())  # its verdict stood
