"""A run or a sweep on a starved machine, shared by the e2e tests (no test module imports another).

When the machine is so busy that the load generator cannot drive the endpoint (CI's own pytest
processes on 2 cores wait for a CPU 1.8-1.9 times as long as they run), the right answer is
INCONCLUSIVE naming the load generator. The tests accept exactly that, verified, and the full answer
otherwise:

- a run: `load_generator_verdict(summary)` is True for an INCONCLUSIVE naming the load generator whose
  client-bound steps' recorded figures meet the rule each names, re-checked by the rule itself
  (`measure.looplag`, `measure.steady`), so a wrong INCONCLUSIVE still fails; False otherwise (the
  test asserts the full answer);
- gates: `gates_held_by_the_load_generator(summary, output)` (a smoke run's printed lines) and
  `verdicts_held_by_the_load_generator(summary, verdicts)` (in-process gates) are True when the run's
  verdict is that verified INCONCLUSIVE and every gate on its figures answered INCONCLUSIVE naming the
  load generator (the request count is still judged); False otherwise (the test asserts its gates);
- a sweep: `skip_if_the_load_generator_was_the_bottleneck` accepts configurations INCONCLUSIVE because
  the load generator was the bottleneck twice, exit 1, and skips the claims only a full answer can meet.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from sm_locust.measure.looplag import LoopLag, client_affected_reason, quotes_reason, starved_reason, throttled_reason
from sm_locust.measure.steady import CLIENT_BUSY_LIMIT_PCT, CLIENT_CPU_LIMIT_PCT, MIN_OFFERED_RATIO

LOAD_GENERATOR = "the load generator, not the endpoint, was the bottleneck in both measurements"
CLIENTS = "its figures are the client's: not ranked, not recommended"
GATE_HELD = "not judged: the load generator was the bottleneck in "  # a gate's line (gates.gates.client_words)
GATE_WORDS = ("PASS", "FAIL", "INCONCLUSIVE")
SEARCH_BOUND = "the load generator was the bottleneck: "  # a search's INCONCLUSIVE reason (plateau.search)
RECORD_ROUNDING = 0.1  # summary.json rounds client_cpu_pct and client_wait_pct to 0.1


def _meets_its_rule(step: Mapping[str, Any]) -> bool:
    """Whether a client-bound step's recorded figures meet the rule its `client_bound_reason` names,
    judged again by that rule on summary.json's figures (a closed loop's rules, and an open loop's offer
    short of its rate; late open-loop sends and an SLO margin are not what a starved CI machine trips)."""
    reason = str(step.get("client_bound_reason") or "")
    cpu, wait = step.get("client_cpu_pct"), step.get("client_wait_pct")
    lag = LoopLag.from_json(step.get("loop_lag"))
    if reason.startswith("the load generator waited for a CPU"):
        return starved_reason(cpu, wait) is not None
    if reason.startswith("client CPU "):
        return cpu is not None and cpu >= CLIENT_CPU_LIMIT_PCT - RECORD_ROUNDING
    if reason.startswith("the client ran or waited for a CPU"):
        return cpu is not None and wait is not None and cpu + wait >= CLIENT_BUSY_LIMIT_PCT - 2 * RECORD_ROUNDING
    if reason.startswith("the load generator was CPU-throttled"):
        return throttled_reason(lag) is not None
    if reason.startswith(("the load generator ran as few as", "the load generator offered")):
        offered, target = step.get("offered_ci95"), step.get("target_rate")
        return isinstance(offered, list) and isinstance(target, (int, float)) \
            and offered[1] < MIN_OFFERED_RATIO * target
    if reason.startswith("the load generator's event loop lagged"):
        return client_affected_reason(lag, step.get("p50_ms")) is not None
    return False


def load_generator_verdict(summary: Mapping[str, Any]) -> bool:
    """summary.json of a finished run: True when its verdict is INCONCLUSIVE because the load generator
    was the bottleneck, verified: its reason names a client-bound step's own reason. False otherwise
    (`ok`, or INCONCLUSIVE on other grounds: the test asserts its own answer). Either way every
    client-bound step's recorded figures must meet the rule it names (`_meets_its_rule`), so a wrong
    client-bound verdict fails the test."""
    bound = [step for step in summary.get("steps", []) if step.get("client_bound")]
    for step in bound:  # a search's re-measured one too, whatever the verdict
        assert _meets_its_rule(step), (f"client-bound, but its recorded figures do not meet the rule it names: "
                                       f"{step}")
    verdict = summary.get("verdict") or {}
    reason = str(verdict.get("reason") or "")
    named = reason.startswith(SEARCH_BOUND) or " was client-bound" in reason
    if verdict.get("status") != "inconclusive" or not named:
        return False
    assert bound, f"INCONCLUSIVE naming the load generator, with no client-bound step: {reason}"
    assert any(quotes_reason(reason, str(step["client_bound_reason"])) for step in bound), (reason, bound)
    return True


def gates_held_by_the_load_generator(summary: Mapping[str, Any], output: str, prefix: str = "sm-locust smoke",
                                     baseline: Mapping[str, Any] | None = None) -> bool:
    """A gate-running command's `output` on the run of `summary` (against `baseline`'s run, with
    --baseline): True when the run's verdict is the load generator's, verified (`load_generator_verdict`),
    or else the baseline's is, and every gate line on a figure says INCONCLUSIVE naming the load generator,
    whose run and the fix, after one note saying why (or the run's INCONCLUSIVE verdict: `smoke` after its
    run); the request count is judged. False when neither verdict is the load generator's: the test
    asserts its own gates."""
    own = load_generator_verdict(summary)
    if not own and not (baseline is not None and load_generator_verdict(baseline)):
        return False
    whose, again = ("the whole run's", "run again") if own else ("the baseline's", "measure the baseline again")
    lines = [line.removeprefix(f"{prefix}: ") for line in output.splitlines() if line.startswith(f"{prefix}: ")]
    gates = [line for line in lines if line.split(" ", 1)[0] in GATE_WORDS]
    figures = [line for line in gates if not line.split(" ", 1)[1].startswith("requests >= ")]
    assert figures, output
    for line in figures:
        assert line.startswith("INCONCLUSIVE ") and GATE_HELD in line and f"so {whose} figures" in line, output
        assert line.endswith((f"add workers, then {again}", f"raise the pod's CPU limit, then {again}")), output
    note = f"note: {'' if own else 'the baseline: '}the run's verdict is INCONCLUSIVE: "
    said = sum(line.startswith(note) for line in lines)
    if own:  # `smoke` after its run prints the run's verdict, INCONCLUSIVE with its reason, in place of the note
        said += sum(line.startswith("INCONCLUSIVE: ") for line in lines)
    assert said == 1, output
    assert f"{len(figures)} inconclusive (the load generator was the bottleneck: " in output, output
    return True


def verdicts_held_by_the_load_generator(summary: Mapping[str, Any], verdicts: Sequence[Any]) -> bool:
    """As `gates_held_by_the_load_generator`, for `sm_locust.gates.Verdict`s of an in-process run."""
    if not load_generator_verdict(summary):
        return False
    figures = [v for v in verdicts if not v.gate.startswith("requests >= ")]
    assert figures and all(v.status == "inconclusive" and v.client_fix and GATE_HELD in v.message
                           for v in figures), [v.line() for v in verdicts]
    return True


def skip_if_the_load_generator_was_the_bottleneck(doc: Mapping[str, Any],
                                                   result: subprocess.CompletedProcess) -> None:
    """sweep.json's `doc` and the sweep's finished process: skip the test when some configuration is
    INCONCLUSIVE because the load generator was the bottleneck twice, and every other one was measured;
    said on the terminal, the sweep exited 1 and recommends none of them. Otherwise return."""
    rows = doc["configurations"]
    inconclusive = [c for c in rows if c["status"] == "inconclusive"]
    if not inconclusive:
        return
    output = result.stdout + result.stderr
    assert {c["status"] for c in rows} <= {"ok", "inconclusive"}, output
    assert result.returncode == 1, output
    for c in inconclusive:
        assert c["reason"].startswith(LOAD_GENERATOR) and CLIENTS in c["reason"], c["reason"]
        assert f"{c['label']}: INCONCLUSIVE: {LOAD_GENERATOR}" in result.stdout, output
        assert c["label"] in doc["recommendation"].get("inconclusive", []), doc["recommendation"]
        assert doc["recommendation"].get("label") != c["label"], doc["recommendation"]
    pytest.skip(f"{len(inconclusive)} of {len(rows)} configurations INCONCLUSIVE: the load generator was the "
                "bottleneck on this busy machine, as the sweep should say")
