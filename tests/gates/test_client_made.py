"""Gates on figures the load generator made (synthetic summaries): a client-bound step answers
INCONCLUSIVE naming the load generator and the fix, whatever the interval says; an answer left
undecided at the step budget and a clean run are judged on their intervals; `run`'s checks read the
same rule (gates/clientmade.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from sm_locust.config.options import parse_options
from sm_locust.core import checks
from sm_locust.core.checks import NOT_JUDGED, run_checks
from sm_locust.gates import FAIL, INCONCLUSIVE, PASS, MaxErrorRate, MaxLatency, MinRequests, MinRps, evaluate
from sm_locust.gates.baseline import Regression, regression_gates
from sm_locust.gates.cli import closing_line, report
from sm_locust.gates.clientmade import client_made, in_whole_run
from sm_locust.measure.looplag import FIX_CPU_LIMIT, FIX_WORKERS, LoopLag, starved_reason, throttled_reason
from sm_locust.record.runfolder import RunData
from sm_locust.record.summary import run_verdict

STARVED_STEP = starved_reason(12.0, 30.0)  # waited 2.5 times as long as it ran
THROTTLED = LoopLag(samples=400, p50_ms=0.2, p99_ms=3.0, max_ms=9.0, lagging=0.1, throttled_periods=0.2).to_json()
UNDECIDED = "the capacity 1,836.6 at 2 users is not known to +-5 % (lengthen --step-seconds)"
# whole-run figures whose intervals decide: p95 48 [46, 51] ms, goodput 99 [97, 101] req/s
TOTALS = {"requests": 3000, "failures": 0, "rps": 100.0, "goodput_rps": 99.0, "p50_ms": 20.0, "p95_ms": 48.0,
          "p99_ms": 70.0, "ci95": {"p95_ms": [46.0, 51.0], "goodput_rps": [97.0, 101.0], "p99_ms": [60.0, 80.0]}}
GATES = [MinRequests(1), MaxLatency(95, 100), MaxLatency(95, 40), MinRps(50), MaxErrorRate(0.0)]
JUDGED = [PASS, PASS, FAIL, PASS, PASS]  # what those gates read on the endpoint's own figures


def step(users: float, *, bound: str | None = None, lag: dict | None = None) -> dict:
    figures = {"users": users, "start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:00:10Z", "requests": 1000,
               "failures": 0, "error_rate": 0.0, "rps": 100.0, "p50_ms": 20.0, "p95_ms": 48.0}
    if bound:
        figures.update(client_bound=True, client_bound_reason=bound, client_cpu_pct=12.0, client_wait_pct=30.0)
    if lag:
        figures["loop_lag"] = lag
    return figures


def summary(steps: list[dict], plateau: dict | None = None, verdict: dict | None = None) -> dict:
    """summary.json as a run writes it: its verdict from its steps (record.summary.verdict_of) unless given."""
    made = {"schema": 1, "duration_s": 30.0, "totals": TOTALS, "steps": steps}
    if plateau is not None:
        made["plateau"] = plateau
    made["verdict"] = verdict or run_verdict(plateau, steps)
    return made


def search(*, bound_at: int | None = None, inconclusive: str | None = None, undecided: list[str] | None = None):
    steps = [step(1), step(2), step(4, bound=STARVED_STEP if bound_at == 2 else None)]
    plateau = {"users": 2, "rps": 100.0, "capacity_step": 1, "knee_step": 1, "reached": True,
               "inconclusive": inconclusive is not None, "inconclusive_reason": inconclusive,
               "client_bound": bool(inconclusive and bound_at is not None), "undecided": undecided}
    return summary(steps, plateau)


STARVED_CONSTANT = summary([step(2, bound=STARVED_STEP)])
STARVED_SEARCH = search(bound_at=2, inconclusive=f"the load generator was the bottleneck: {STARVED_STEP} at 4 users "
                                                "(measured twice)")
BUDGET_UNDECIDED = search(inconclusive=UNDECIDED, undecided=[UNDECIDED])
MEASURED_AGAIN = search(bound_at=2)  # a step the answer does not rest on was client-bound: the verdict is ok
CLEAN = summary([step(2)])


def run(data: dict) -> RunData:
    return RunData(summary=data)


@pytest.mark.parametrize("data", [STARVED_CONSTANT, STARVED_SEARCH], ids=["constant", "search"])
def test_a_starved_run_decides_no_gate_on_its_figures(data):
    """Judged by their intervals these would read PASS and FAIL, on figures the verdict says are partly the
    client's: no gate decides on them, and the exit code follows --inconclusive."""
    verdicts = evaluate(GATES, run(data))
    assert [v.status for v in verdicts] == [PASS] + [INCONCLUSIVE] * 4  # the request count is a fact of the run
    bound = [i for i, s in enumerate(data["steps"]) if s.get("client_bound")]
    where = f"step {bound[0] + 1} ({data['steps'][bound[0]]['users']:g} users) of {len(data['steps'])}"
    for verdict in verdicts[1:]:
        assert verdict.client_fix == FIX_WORKERS
        assert verdict.message == (f"{verdict.observed}, not judged: the load generator was the bottleneck in {where}, "
                                   "so the whole run's figures are partly the client's, not the endpoint's; "
                                   f"{FIX_WORKERS}, then run again")
    assert verdicts[2].observed == "48 ms [46, 51]"  # the figure is still shown
    assert [v.fails() for v in verdicts] == [False] + [True] * 4
    assert not any(v.fails(inconclusive_passes=True) for v in verdicts)
    assert closing_line(verdicts) == ("1 of 5 gates passed, 4 inconclusive (the load generator was the bottleneck: "
                                      f"{FIX_WORKERS}; counted as a failure: --inconclusive pass to accept it) "
                                      "- FAILED")
    made = client_made(data)
    assert made is not None and made.verdict and made.steps == tuple(bound)


@pytest.mark.parametrize("data", [BUDGET_UNDECIDED, CLEAN], ids=["budget-undecided", "clean"])
def test_the_endpoints_own_figures_are_judged_on_their_intervals(data):
    """An answer left undecided at the step budget is INCONCLUSIVE on the endpoint's own figures: no
    step was client-bound, and each gate reads its interval as on a clean run."""
    assert client_made(data) is None and in_whole_run(data) is None
    verdicts = evaluate(GATES, run(data))
    assert [v.status for v in verdicts] == JUDGED
    assert not any(v.client_fix for v in verdicts)
    straddles = evaluate([MaxLatency(95, 50)], run(data))[0]
    assert straddles.status == INCONCLUSIVE and "straddles the limit" in straddles.message
    assert closing_line([straddles]) == ("0 of 1 gates passed, 1 inconclusive (counted as a failure: "
                                         "--inconclusive pass to accept it) - FAILED")


def test_a_whole_run_figure_holds_every_step_a_step_window_only_its_own():
    """The search's verdict is ok (its answer rests on steps 1-2), but step 3 was client-bound: the
    whole run's figures pooled its requests, so the gates do not judge them; `run`'s checks read the
    verdict's step, which the client did not hold back, and judge it."""
    assert client_made(MEASURED_AGAIN) is None
    made = in_whole_run(MEASURED_AGAIN)
    assert made is not None and not made.verdict and made.steps == (2,)
    assert made.text == f"step 3 (4 users) was client-bound: {STARVED_STEP}"
    verdicts = evaluate(GATES, run(MEASURED_AGAIN))
    assert [v.status for v in verdicts] == [PASS] + [INCONCLUSIVE] * 4
    assert "in step 3 (4 users) of 3" in verdicts[1].message
    options = parse_options({"latency_slo_ms": 100, "max_error_rate": 0.01})
    assert [c.status for c in run_checks(MEASURED_AGAIN, options)] == [checks.PASS] * 2
    assert [c.status for c in run_checks(STARVED_SEARCH, options)] == [NOT_JUDGED, NOT_JUDGED]
    assert [c.status for c in run_checks(BUDGET_UNDECIDED, options)] == [checks.PASS] * 2


def test_a_throttled_generator_names_the_pods_cpu_limit():
    reason = throttled_reason(LoopLag.from_json(THROTTLED))
    data = summary([step(2, bound=reason, lag=THROTTLED)])
    verdicts = evaluate([MaxLatency(95, 100)], run(data))
    assert verdicts[0].client_fix == FIX_CPU_LIMIT and verdicts[0].message.endswith(f"{FIX_CPU_LIMIT}, then run again")
    both = summary([step(2, bound=reason, lag=THROTTLED), step(4, bound=STARVED_STEP)])
    assert in_whole_run(both).fix == f"{FIX_CPU_LIMIT} and {FIX_WORKERS}"


def test_a_gate_with_nothing_to_judge_still_says_so():
    """A request name the run does not have fails as before: there is no figure, the client's or not."""
    verdict = evaluate([MaxLatency(95, 100, "nope")], run(STARVED_CONSTANT))[0]
    assert verdict.status == FAIL and "no requests named 'nope'" in verdict.message


def test_a_regression_gate_judges_neither_a_starved_run_nor_a_starved_baseline(capsys):
    """A change from figures the load generator made, this run's or the baseline's, is the client's."""
    clean, starved = RunData(summary=CLEAN), RunData(summary=STARVED_CONSTANT)
    gates = regression_gates(clean, tolerance=0.1)
    assert [type(g).__name__ for g in gates] == ["Regression", "Regression", "Regression", "NoRegression"]
    assert [v.status for v in evaluate(gates, clean)] == [PASS] * 4
    own = evaluate(gates, starved)
    assert [v.status for v in own] == [INCONCLUSIVE] * 4 and all(v.client_fix == FIX_WORKERS for v in own)
    assert "in step 1 (2 users) of 1, so the whole run's figures" in own[0].message
    against = regression_gates(starved, tolerance=0.1)
    verdicts, code = report(against, clean, prefix="p")
    assert code == 1 and [v.status for v in verdicts] == [INCONCLUSIVE] * 4
    assert verdicts[0].message.endswith("not judged: the load generator was the bottleneck in the baseline's step 1 "
                                        "(2 users) of 1, so the baseline's figures are partly the client's, not the "
                                        f"endpoint's; {FIX_WORKERS}, then measure the baseline again")
    out = capsys.readouterr().out.splitlines()
    assert [line for line in out if line.startswith("p: note: ")] == [
        f"p: note: the baseline: the run's verdict is INCONCLUSIVE: step 1 (2 users) was client-bound: {STARVED_STEP}"]
    assert evaluate([Regression("p95", clean, 0.1)], clean)[0].status == PASS  # a Regression built directly
    empty = RunData(summary={"schema": 1, "totals": {"requests": 0, "failures": 0, "rps": 0.0}})
    nothing = evaluate(against[:1], empty)[0]  # nothing to compare, whoever made the baseline: said so
    assert nothing.status == FAIL and nothing.message == "no p95 to compare: the run has no requests"


@pytest.mark.parametrize("inconclusive, code", [("fail", 1), ("pass", 0)])
def test_the_exit_code_follows_inconclusive_and_junit_says_why(tmp_path, capsys, inconclusive, code):
    junit = tmp_path / "junit.xml"
    verdicts, exit_code = report(GATES, run(STARVED_CONSTANT), junit=str(junit), prefix="sm-locust smoke",
                                 inconclusive=inconclusive)
    assert exit_code == code
    lines = capsys.readouterr().out.splitlines()
    notes = [line for line in lines if line.startswith("sm-locust smoke: note: ")]
    assert notes == [f"sm-locust smoke: note: the run's verdict is INCONCLUSIVE: step 1 (2 users) was client-bound: "
                     f"{STARVED_STEP}"]
    assert sum(line.startswith("sm-locust smoke: INCONCLUSIVE ") for line in lines) == 4
    assert "the load generator was the bottleneck: add workers" in lines[-1]
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == str(4 if inconclusive == "fail" else 0)
    failures = suite.findall("testcase/failure")
    assert all(f.get("type") == "GateInconclusive" and "the load generator was the bottleneck" in (f.text or "")
               and FIX_WORKERS in (f.text or "") for f in failures)
    properties = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
    assert properties["load_generator"] == notes[0].removeprefix("sm-locust smoke: note: ")
    assert all("INCONCLUSIVE" in (case.findtext("system-out") or "") for case in suite.findall("testcase")[1:])


def test_smoke_after_its_run_gives_the_reason_once_in_its_verdict_not_again_in_a_note(tmp_path, capsys):
    """`verdict_said`: `smoke` printed the run's INCONCLUSIVE verdict; the note repeating it is left out,
    the JUnit file keeps it, and a baseline's own note (no verdict said it) stays."""
    junit = tmp_path / "junit.xml"
    verdicts, exit_code = report(GATES, run(STARVED_CONSTANT), junit=str(junit), prefix="p", verdict_said=True)
    lines = capsys.readouterr().out.splitlines()
    assert exit_code == 1 and not [line for line in lines if "note" in line]
    assert sum(line.startswith("p: INCONCLUSIVE ") for line in lines) == 4  # the gate lines, as without it
    properties = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}
    assert properties["load_generator"].endswith(f"step 1 (2 users) was client-bound: {STARVED_STEP}")
    against = regression_gates(run(STARVED_CONSTANT), 0.1)
    report(against, run(CLEAN), prefix="p", verdict_said=True)
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("p: note: ")]
    assert notes == [f"p: note: the baseline: the run's verdict is INCONCLUSIVE: step 1 (2 users) was client-bound: "
                     f"{STARVED_STEP}"]


def test_a_clean_run_prints_no_load_generator_note(capsys):
    _, exit_code = report(GATES[:2], run(CLEAN), prefix="p")
    assert exit_code == 0 and "note" not in capsys.readouterr().out


def test_the_e2e_tests_accept_only_gates_held_by_a_verified_load_generator(capsys):
    """tests/starved.py's gate helpers, fed what `report` prints: True on a starved run whose figure gates
    all said so; False on a clean run (the test judges its gates); a PASS on a starved run fails."""
    from tests.starved import gates_held_by_the_load_generator, verdicts_held_by_the_load_generator

    report(GATES, run(STARVED_CONSTANT), prefix="sm-locust smoke")
    starved = capsys.readouterr().out
    assert gates_held_by_the_load_generator(STARVED_CONSTANT, starved) is True
    assert verdicts_held_by_the_load_generator(STARVED_CONSTANT, evaluate(GATES, run(STARVED_CONSTANT))) is True
    report(GATES, run(CLEAN), prefix="sm-locust smoke")
    assert gates_held_by_the_load_generator(CLEAN, capsys.readouterr().out) is False
    judged = starved.replace("INCONCLUSIVE p95 <= 100 ms", "PASS p95 <= 100 ms", 1)
    with pytest.raises(AssertionError):
        gates_held_by_the_load_generator(STARVED_CONSTANT, judged)
    with pytest.raises(AssertionError):
        verdicts_held_by_the_load_generator(STARVED_CONSTANT, evaluate(GATES, run(CLEAN)))
    report(regression_gates(run(STARVED_CONSTANT), tolerance=0.1), run(CLEAN), prefix="sm-locust smoke")
    against_starved = capsys.readouterr().out
    assert gates_held_by_the_load_generator(CLEAN, against_starved) is False  # the baseline not given: judge
    assert gates_held_by_the_load_generator(CLEAN, against_starved, baseline=STARVED_CONSTANT) is True
    with pytest.raises(AssertionError):  # this run's figures were judged: not what a starved run answers
        gates_held_by_the_load_generator(STARVED_CONSTANT, against_starved)


def test_the_closing_line_counts_the_load_generators_inconclusive_gates_apart():
    held = evaluate([MaxLatency(95, 100)], run(STARVED_CONSTANT))[0]
    straddles = evaluate([MaxLatency(95, 50)], run(CLEAN))[0]
    assert held.held is not None and straddles.held is None and straddles.client_fix is None
    assert closing_line([held, straddles], inconclusive_passes=True) == (
        "0 of 2 gates passed, 2 inconclusive (1 of them: the load generator was the bottleneck: add workers; "
        "counted as a pass: --inconclusive pass)")


def test_a_run_that_lost_a_worker_decides_no_gate_on_its_figures():
    """A Locust worker lost before the last steps ended: those steps measured less load than asked, so the
    figure gates are INCONCLUSIVE with the lost worker's reason and its fix, naming the steps after the loss;
    the same run whose verdict stood (the loss after every judged step) is judged on its intervals."""
    from sm_locust.record.model import Step, Verdict, Workers
    from sm_locust.record.summary import LOST_WORKER_FIX, lost_worker_verdict

    t0 = 1767225600.0  # 2026-01-01T00:00:00Z, the steps' start
    steps = [{**step(1), "end": "2026-01-01T00:00:10Z"}, {**step(2), "start": "2026-01-01T00:00:10Z",
                                                          "end": "2026-01-01T00:00:20Z"}]
    workers = {"expected": 2, "connected": 2, "at_end": 1, "lost": [{"id": "w1", "reason": "missing", "after_s": 16.0}]}
    verdict = lost_worker_verdict(Verdict.make(status="ok", reason=None), [Step.from_json(s) for s in steps],
                                  Workers.make(**workers), t0)
    assert verdict.status == "inconclusive" and verdict.reason and LOST_WORKER_FIX in verdict.reason
    lost = {**summary(steps), "started_at": "2026-01-01T00:00:00Z", "workers": workers, "verdict": verdict.to_json()}
    made = client_made(lost)
    assert made is not None and made.steps == (1,) and made.fix == LOST_WORKER_FIX  # lost at 12 s: step 2 ended after
    whole = in_whole_run(lost)
    assert whole is not None and whole.steps == (1,) and whole.verdict
    verdicts = evaluate(GATES, run(lost))
    assert [v.status for v in verdicts] == [PASS] + [INCONCLUSIVE] * 4
    assert all(v.client_fix == LOST_WORKER_FIX and "a Locust worker was lost in step 2 (2 users) of 2" in v.message
               for v in verdicts[1:])
    stood = {**lost, "verdict": {"status": "ok", "reason": None}}  # no loss named by the verdict
    assert client_made(stood) is None and in_whole_run(stood) is None
    assert [v.status for v in evaluate(GATES, run(stood))] == JUDGED
