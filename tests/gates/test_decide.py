"""A gate's three answers from a figure, its interval and a limit; how much longer a run would decide
(pure arithmetic on synthetic numbers), and the gates reading summary.json's `totals.ci95`."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest

from sm_locust.gates import FAIL, INCONCLUSIVE, PASS, MaxErrorRate, MaxLatency, MinRps, evaluate
from sm_locust.gates.cli import closing_line
from sm_locust.gates.decide import (
    Bounds,
    judge,
    longer_run_factor,
    longer_run_factor_split,
    longer_run_text,
)
from sm_locust.gates.junit import to_junit_xml
from sm_locust.record.runfolder import RunData
from tests.conftest import run_cli
from tests.fakes import write_run_folder


@pytest.mark.parametrize("low, high, limit, upper, status", [
    (30, 38, 40, True, PASS), (30, 40, 40, True, PASS), (30, 45, 40, True, INCONCLUSIVE), (41, 45, 40, True, FAIL),
    (40, 45, 40, True, INCONCLUSIVE),
    (50, 60, 45, False, PASS), (45, 60, 45, False, PASS), (40, 60, 45, False, INCONCLUSIVE), (30, 44, 45, False, FAIL),
])
def test_the_interval_against_the_limit_decides(low, high, limit, upper, status):
    value = (low + high) / 2
    assert judge(Bounds.of(value, low, high), limit, upper=upper) == status


def test_an_interval_that_misses_its_point_is_widened_to_hold_it():
    assert Bounds.of(50, 40, 45) == Bounds(50.0, 40.0, 50.0)
    assert judge(Bounds.of(50, 40, 45), 48, upper=True) == INCONCLUSIVE  # the point is over the limit


def test_longer_run_factor_is_the_squared_ratio_of_reach_to_distance():
    # point 36, interval reaches 4 above it, limit 2 above: (4 / 2)^2 = 4x the run
    assert longer_run_factor(Bounds.of(36, 33, 40), 38) == pytest.approx(4.0)
    # the side of the interval that faces the limit counts, not the other one
    assert longer_run_factor(Bounds.of(36, 20, 40), 38) == pytest.approx(4.0)
    assert longer_run_factor(Bounds.of(50, 44, 60), 48) == pytest.approx(9.0)  # a minimum: the lower side
    assert longer_run_factor(Bounds.of(40, 30, 50), 40) is None  # on the limit: no length decides
    assert longer_run_factor(Bounds.of(30, 29, 31), 40) == 1.0  # already decided


def test_a_longer_run_halves_the_interval_at_four_times_the_length():
    """The estimate's premise, checked on its own arithmetic: after f x the run the reach is
    reach / sqrt(f), which then equals the distance to the limit."""
    bounds, limit = Bounds.of(100.0, 90.0, 112.0), 105.0
    factor = longer_run_factor(bounds, limit)
    assert factor is not None
    assert (bounds.high - bounds.value) / math.sqrt(factor) == pytest.approx(limit - bounds.value)


def test_split_variance_needs_more_than_the_plain_estimate_and_can_be_impossible():
    plain = (6.0 / 3.0) ** 2  # reach 6, distance 3, all variance shrinking
    assert longer_run_factor_split(3.0, 6.0, 0.0, 1.0) == pytest.approx(plain)
    with_base = longer_run_factor_split(3.0, 6.0, 0.2, 0.8)
    assert with_base is not None and with_base > plain  # the baseline's share does not shrink
    assert longer_run_factor_split(3.0, 6.0, 0.9, 0.1) is None  # the baseline alone reaches past: no length helps
    assert longer_run_factor_split(0.0, 6.0, 0.0, 1.0) is None


def test_longer_run_text_says_how_long_or_why_not():
    assert longer_run_text(4.0, 15.0) == ("a run of about 60 s (4x this one) would decide it, if the figure stays "
                                          "where it is")
    assert "about 10 min" in longer_run_text(40.0, 15.0)
    assert "sits on the limit" in longer_run_text(None, 15.0)
    assert "only a longer baseline would decide it" in longer_run_text(None, 15.0, baseline=True)
    assert "over 100x" in longer_run_text(500.0, 15.0)


# -- the gates on summary.json's intervals --------------------------------------------------------

def summary(**ci95) -> dict:
    return {"schema": 1, "duration_s": 15.0,
            "totals": {"requests": 700, "failures": 0, "rps": 46.7, "goodput_rps": 46.7, "p50_ms": 42.0,
                       "p95_ms": 48.0, "p99_ms": 60.0, "errors": {},
                       "ci95": {"rps": [44.0, 49.0], "goodput_rps": [44.0, 49.0], "p50_ms": [41.0, 43.0],
                                "p95_ms": [46.0, 51.0], "p99_ms": [55.0, 70.0], **ci95}}}


@pytest.mark.parametrize("gate, status", [
    (MaxLatency(95, 52), PASS), (MaxLatency(95, 50), INCONCLUSIVE), (MaxLatency(95, 45), FAIL),
    (MaxLatency(99, 80), PASS), (MaxLatency(99, 65), INCONCLUSIVE), (MaxLatency(99, 50), FAIL),
    (MinRps(40), PASS), (MinRps(47), INCONCLUSIVE), (MinRps(50), FAIL),
    (MaxErrorRate(0.0), PASS),  # a count: no interval
])
def test_threshold_gates_read_the_recorded_interval(gate, status):
    verdict = evaluate([gate], RunData(summary=summary()))[0]
    assert verdict.status == status, verdict.line()
    assert verdict.line().split()[0] == {PASS: "PASS", FAIL: "FAIL", INCONCLUSIVE: "INCONCLUSIVE"}[status]


def test_an_inconclusive_line_shows_the_interval_and_how_much_longer():
    verdict = evaluate([MaxLatency(95, 50)], RunData(summary=summary()))[0]
    # point 48, interval reaches 51: reach 3, distance 2 -> (3/2)^2 = 2.25 x 15 s = 34 s
    assert verdict.line() == ("INCONCLUSIVE p95 <= 50 ms (all requests): p95 48 ms [46, 51]: the interval straddles "
                              "the limit of 50 ms; a run of about 34 s (2.3x this one) would decide it, if the figure "
                              "stays where it is")
    passed = evaluate([MaxLatency(95, 52)], RunData(summary=summary()))[0]
    assert passed.line() == "PASS p95 <= 52 ms (all requests): observed 48 ms [46, 51]"
    failed = evaluate([MaxLatency(95, 45)], RunData(summary=summary()))[0]
    assert failed.message == "p95 48 ms [46, 51]: the whole interval is over the limit of 45 ms"


def test_a_run_too_short_for_an_interval_and_a_name_are_judged_on_their_point_and_say_so():
    run = RunData(summary={**summary(p95_ms=None), "by_name": {"ep": {"requests": 700, "failures": 0, "rps": 46.7,
                                                                      "p95_ms": 48.0}}})
    verdicts = evaluate([MaxLatency(95, 500), MaxLatency(95, 40), MaxLatency(95, 500, "ep"), MaxLatency(95, 40, "ep")],
                        run)
    assert [v.status for v in verdicts] == [PASS, FAIL, PASS, FAIL]
    assert verdicts[0].line() == ("PASS p95 <= 500 ms (all requests): observed 48 ms (point value: the run is too "
                                  "short for a 95 % interval (4 seconds of samples at least): run longer to decide)")
    assert "point value: no interval for one request name's figures" in verdicts[3].message


def test_inconclusive_fails_the_run_unless_let_pass():
    verdicts = evaluate([MaxLatency(95, 52), MaxLatency(95, 50)], RunData(summary=summary()))
    assert [v.fails() for v in verdicts] == [False, True]
    assert [v.fails(inconclusive_passes=True) for v in verdicts] == [False, False]
    assert closing_line(verdicts) == ("1 of 2 gates passed, 1 inconclusive (counted as a failure: --inconclusive pass "
                                      "to accept it) - FAILED")
    assert closing_line(verdicts, True) == ("1 of 2 gates passed, 1 inconclusive (counted as a pass: "
                                            "--inconclusive pass)")


def test_junit_carries_the_same_text_as_the_terminal():
    verdicts = evaluate([MaxLatency(95, 52), MaxLatency(95, 50), MaxLatency(95, 45)], RunData(summary=summary()))
    for lenient, failures in ((False, "2"), (True, "1")):
        suite = ET.fromstring(to_junit_xml(verdicts, inconclusive_passes=lenient)).find("testsuite")
        assert suite.get("failures") == failures
        cases = suite.findall("testcase")
        assert [c.find("system-out").text for c in cases] == [v.line() for v in verdicts]
        kinds = [c.find("failure").get("type") if c.find("failure") is not None else None for c in cases]
        assert kinds == [None, None if lenient else "GateInconclusive", "GateFailed"]
        if not lenient:
            assert cases[1].find("failure").get("message") == verdicts[1].line()


@pytest.mark.e2e
def test_smoke_inconclusive_exit_codes(tmp_path):
    run = write_run_folder(tmp_path / "run", summary(), [])
    strict = run_cli("smoke", "--run-dir", str(run), "--max-p95-ms", "50", "--junit", str(tmp_path / "j.xml"))
    assert strict.returncode == 1, strict.stdout + strict.stderr
    assert "INCONCLUSIVE p95 <= 50 ms (all requests): p95 48 ms [46, 51]" in strict.stdout
    lenient = run_cli("smoke", "--run-dir", str(run), "--max-p95-ms", "50", "--inconclusive", "pass")
    assert lenient.returncode == 0, lenient.stdout + lenient.stderr
    assert "counted as a pass" in lenient.stdout
    bad = run_cli("smoke", "--run-dir", str(run), "--inconclusive", "maybe")
    assert bad.returncode == 2 and "--inconclusive" in bad.stderr
