"""Gates as pure logic (synthetic summary.json data), their one-line usage errors, and JUnit XML
parsed back. The runs against a local endpoint made fast or slow are in test_smoke.py."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from sm_locust.errors import UsageError
from sm_locust.gates import MaxErrorRate, MaxLatency, MinRequests, MinRps, NoRegression, evaluate
from sm_locust.gates.baseline import regression_gates
from sm_locust.gates.junit import to_junit_xml
from sm_locust.gates.spec import GateSpec, parse_limit
from sm_locust.record.runfolder import Metrics, RunData, load_run
from tests.conftest import assert_one_line_error, run_cli
from tests.fakes import write_run_folder

SUMMARY = {"schema": 1, "totals": {"requests": 1000, "failures": 20, "rps": 50.0, "p50_ms": 20.0, "p95_ms": 45.0,
                                   "p99_ms": 80.0, "errors": {"ThrottlingException": 20}}}
STATS_ROWS = [
    {"Type": "sagemaker", "Name": "fast", "Request Count": "600", "Failure Count": "0", "Requests/s": "30",
     "50%": "10", "95%": "20", "99%": "30"},
    {"Type": "sagemaker", "Name": "slow", "Request Count": "400", "Failure Count": "20", "Requests/s": "20",
     "50%": "60", "95%": "90", "99%": "150"},
    {"Type": "", "Name": "Aggregated", "Request Count": "1000", "Failure Count": "20", "Requests/s": "50",
     "50%": "20", "95%": "45", "99%": "80"},
]
BY_NAME = {"fast": Metrics(requests=600, failures=0, rps=30.0, p50_ms=10.0, p95_ms=20.0, p99_ms=30.0),
           "slow": Metrics(requests=400, failures=20, rps=20.0, p50_ms=60.0, p95_ms=90.0, p99_ms=150.0)}
RUN = RunData(summary=SUMMARY, by_name=BY_NAME)  # what load_run reads from write_run's folder


def write_run(folder, summary=SUMMARY, rows=STATS_ROWS):
    return write_run_folder(folder, summary, rows)


@pytest.mark.parametrize("gate, passed", [
    (MaxLatency(95, 50), True), (MaxLatency(95, 44), False), (MaxLatency(99, 80), True), (MaxLatency(99, 79.9), False),
    (MaxErrorRate(0.02), True), (MaxErrorRate(0.019), False), (MinRps(49), True), (MinRps(49.1), False),
    (MinRequests(1000), True), (MinRequests(1001), False),
    (MaxLatency(95, 25, "fast"), True), (MaxLatency(95, 25, "slow"), False), (MaxErrorRate(0.0, "fast"), True),
    (MaxErrorRate(0.0, "slow"), False), (MinRps(25, "fast"), True), (MinRps(25, "slow"), False),
])
def test_each_gate_passes_and_fails(gate, passed):
    verdict = evaluate([gate], RUN)[0]
    assert verdict.passed is passed
    assert verdict.line().startswith("PASS" if passed else "FAIL")
    assert "\n" not in verdict.line()
    if not passed:
        assert "limit" in verdict.message or "minimum" in verdict.message or "fewer" in verdict.message


def test_failure_messages_name_observed_and_limit():
    """A run folder without intervals (from before them) is judged on its point values, and says so."""
    assert MaxLatency(95, 30).judge(RUN).message == ("p95 was 45 ms, over the limit of 30 ms (point value: this run "
                                                     "folder records no interval)")
    assert "2.00%" in MaxErrorRate(0.01).judge(RUN).message and "1.00%" in MaxErrorRate(0.01).judge(RUN).message
    assert MinRps(60).judge(RUN).message == ("goodput was 49.0 req/s (successful invocations; 50.0 attempted), "
                                             "under the minimum of 60 req/s (point value: this run folder records "
                                             "no interval)")


def test_unknown_request_name_fails_and_lists_names():
    message = MaxLatency(95, 100, "nope").judge(RUN).message
    assert "nope" in message and "fast, slow" in message


def test_a_gate_with_nothing_to_observe_shows_the_missing_marker():
    assert MaxLatency(95, 100, "nope").observed(RUN) == "n/a"
    assert MaxErrorRate(0.01, "nope").observed(RUN) == "n/a"
    assert NoRegression("p95", 40.0, 0.1, scope="nope").observed(RUN) == "n/a"


def test_run_without_requests_fails_the_smoke_gate():
    empty = RunData(summary={"totals": {"requests": 0, "failures": 0, "rps": 0, "p95_ms": None}})
    verdicts = evaluate([MinRequests(1), MaxLatency(95, 100)], empty)
    assert [v.passed for v in verdicts] == [False, False]


def test_regression_gates_with_tolerance():
    baseline = RunData(summary={"totals": {"requests": 1000, "failures": 0, "rps": 50, "p95_ms": 40, "p99_ms": 80}})
    gates = regression_gates(baseline, tolerance=0.2)
    assert [getattr(g, "figure", getattr(g, "metric", None)) for g in gates] == ["p95", "p99", "goodput", "error_rate"]
    same = evaluate(gates, baseline)
    assert all(v.passed for v in same)
    worse = RunData(summary={"totals": {"requests": 1000, "failures": 50, "rps": 30, "p95_ms": 49, "p99_ms": 95}})
    by_metric = {getattr(g, "figure", getattr(g, "metric", None)): v
                 for g, v in zip(gates, evaluate(gates, worse), strict=True)}
    assert by_metric["p95"].passed is False and "+23 %" in by_metric["p95"].message  # 49 / 40, point values
    assert by_metric["p99"].passed is True  # 95 <= 96
    assert by_metric["goodput"].passed is False  # 30 x 0.95 < 40
    assert by_metric["error_rate"].passed is False  # 5% > 0% + 1 point
    assert NoRegression("error_rate", 0.0, 0.1, slack=0.01).judge(
        RunData(summary={"totals": {"requests": 100, "failures": 1}})).status == "pass"


@pytest.mark.parametrize("spec, needle", [
    (GateSpec(max_p95_ms=["-5"]), "more than 0 ms"),
    (GateSpec(max_p99_ms=["0"]), "more than 0 ms"),
    (GateSpec(max_error_rate=["1.5"]), "between 0 and 1"),
    (GateSpec(max_error_rate=["-0.1"]), "between 0 and 1"),
    (GateSpec(min_rps=["-1"]), "negative"),
    (GateSpec(max_p95_ms=["300"], max_p99_ms=["200"]), "contradictory"),
    (GateSpec(max_p95_ms=["ep=300"], max_p99_ms=["ep=200"]), "contradictory"),
    (GateSpec(max_p95_ms=["fast"]), "not a number"),
    (GateSpec(max_p95_ms=["=5"]), "empty"),
    (GateSpec(max_p95_ms=["100", "200"]), "twice"),
])
def test_unmeetable_or_contradictory_limits_are_usage_errors(spec, needle):
    with pytest.raises(UsageError) as info:
        spec.build()
    assert needle in info.value.message
    assert info.value.exit_code == 2


def test_limits_per_name_do_not_contradict_other_scopes():
    gates = GateSpec(max_p95_ms=["300", "ep=100"], max_p99_ms=["ep=200"]).build()
    assert [g.name for g in gates][1:] == ["p95 <= 300 ms (all requests)", "p95 <= 100 ms (name 'ep')",
                                           "p99 <= 200 ms (name 'ep')"]
    assert parse_limit("--min-rps", "a=b=3").scope == "a=b"


def test_junit_xml_parses_back_one_testcase_per_gate():
    verdicts = evaluate([MaxLatency(95, 50), MaxLatency(99, 10), MinRps(1)], RUN)
    root = ET.fromstring(to_junit_xml(verdicts, time_s=5.0, timestamp="2026-01-01T00:00:00",
                                      properties={"run_dir": "r"}))
    suite = root.find("testsuite")
    assert suite.get("tests") == "3" and suite.get("failures") == "1" and suite.get("errors") == "0"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [v.gate for v in verdicts]
    failed = [c for c in cases if c.find("failure") is not None]
    assert len(failed) == 1 and failed[0].get("name").startswith("p99")
    assert "80 ms" in failed[0].find("failure").get("message")
    assert suite.find("properties/property").get("value") == "r"


def test_load_run_reads_per_name_rows(tmp_path):
    run = load_run(write_run(tmp_path / "run"))
    assert run.totals.requests == 1000 and run.by_name["slow"].p99_ms == 150
    assert run.by_name == BY_NAME and run.totals == RUN.totals  # "Aggregated" is not a name


def test_load_run_rejects_folders_that_are_not_runs(tmp_path):
    with pytest.raises(UsageError, match="not a directory"):
        load_run(tmp_path / "missing")
    with pytest.raises(UsageError, match="no summary.json"):
        load_run(tmp_path)
    (tmp_path / "summary.json").write_text("{not json")
    with pytest.raises(UsageError, match="not readable JSON"):
        load_run(tmp_path)
    (tmp_path / "summary.json").write_text("[]")
    with pytest.raises(UsageError, match="no 'totals'"):
        load_run(tmp_path)


# -- the command over existing run folders (no traffic) ---------------------------------------

@pytest.mark.e2e
def test_smoke_run_dir_pass_and_fail_with_junit(tmp_path):
    run = write_run(tmp_path / "run")
    ok = run_cli("smoke", "--run-dir", str(run), "--max-p95-ms", "50", "--max-p95-ms", "fast=25", "--min-rps", "40",
                 "--max-error-rate", "0.05", "--junit", str(tmp_path / "ok.xml"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.count("sm-locust smoke: PASS") == 5
    bad = run_cli("smoke", "--run-dir", str(run), "--max-p99-ms", "slow=100", "--max-error-rate", "0.01",
                  "--junit", str(tmp_path / "bad.xml"))
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "FAIL p99 <= 100 ms (name 'slow'): p99 was 150 ms" in bad.stdout
    assert "FAIL error rate <= 1.00% (all requests)" in bad.stdout
    suite = ET.parse(tmp_path / "bad.xml").getroot().find("testsuite")
    assert suite.get("failures") == "2" and suite.get("tests") == "3"


@pytest.mark.e2e
def test_smoke_default_gate_is_no_failures(tmp_path):
    result = run_cli("smoke", "--run-dir", str(write_run(tmp_path / "run")))
    assert result.returncode == 1
    assert "FAIL error rate <= 0.00%" in result.stdout


@pytest.mark.e2e
def test_smoke_baseline_regression(tmp_path):
    base = write_run(tmp_path / "base",
                     {"totals": {"requests": 1000, "failures": 20, "rps": 80, "p95_ms": 30, "p99_ms": 70}})
    run = write_run(tmp_path / "run")
    result = run_cli("smoke", "--run-dir", str(run), "--baseline", str(base), "--tolerance", "0.25")
    assert result.returncode == 1, result.stdout + result.stderr
    # no timeline.jsonl in these folders: the point values decide, and the lines say so
    assert "FAIL p95 vs baseline 30 ms (fails on a significant regression beyond 25%): p95 +50 %" in result.stdout
    assert "PASS p99 vs baseline 70 ms (fails on a significant regression beyond 25%): p99 +14 %" in result.stdout
    assert "FAIL goodput" in result.stdout  # 49 < 78.4 x 0.75
    assert "point values: no per-second samples (timeline.jsonl) in the baseline" in result.stdout
    same = run_cli("smoke", "--run-dir", str(run), "--baseline", str(run))
    assert same.returncode == 0, same.stdout


@pytest.mark.e2e
@pytest.mark.parametrize("args, needles", [
    (["--max-p95-ms", "-1"], ["--max-p95-ms", "more than 0"]),
    (["--max-p95-ms", "300", "--max-p99-ms", "200"], ["contradictory"]),
    (["--max-error-rate", "2"], ["between 0 and 1"]),
    (["--baseline", "{tmp}"], ["baseline", "not a run"]),
    (["--baseline", "{tmp}/nope"], ["baseline", "not a directory"]),
    (["--tolerance", "1.5", "--baseline", "{run}"], ["--tolerance"]),
])
def test_smoke_bad_input_is_one_line_exit_2(tmp_path, args, needles):
    run = write_run(tmp_path / "run")
    args = [a.format(tmp=tmp_path, run=run) for a in args]
    result = run_cli("smoke", "--run-dir", str(run), *args)
    assert_one_line_error(result, 2, *needles)


@pytest.mark.e2e
def test_smoke_run_dir_that_is_not_a_run(tmp_path):
    assert_one_line_error(run_cli("smoke", "--run-dir", str(tmp_path)), 2, "not a run")
