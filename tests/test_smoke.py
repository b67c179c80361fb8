"""`sm-locust smoke` end to end: each gate passes on a fast local endpoint and fails on one made slow
(--latency-ms), short of capacity (--max-concurrency / --service-time-ms) or failing
(--error-ratio); the JUnit XML is parsed back; a slow run regresses against a fast baseline."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from tests.conftest import SAMPLE_PAYLOAD, run_cli


def smoke(endpoint, out, *gates: str, seconds: str = "3s", users: str = "2"):
    return run_cli("smoke", "--endpoint-name", "ep", "--endpoint-url", endpoint.url, "--payload", str(SAMPLE_PAYLOAD),
                   "-u", users, "-r", "20", "-t", seconds, "--out", str(out), *gates, "--junit", str(out / "junit.xml"))


def junit_cases(path) -> dict[str, bool]:
    suite = ET.parse(path).getroot().find("testsuite")
    return {case.get("name"): case.find("failure") is None for case in suite.findall("testcase")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One fast and one slow smoke run (each ~3 s), shared by the gate tests below."""
    from sm_locust.endpoint.server import LocalEndpoint

    base = tmp_path_factory.mktemp("smoke")
    results = {}
    with LocalEndpoint(log_path=base / "fast.log") as fast:
        results["fast"] = smoke(fast, base / "fast", "--max-p95-ms", "200", "--max-p99-ms", "400", "--max-error-rate",
                                "0",
                                "--min-rps", "20", "--max-p95-ms", "ep=200")
    with LocalEndpoint(log_path=base / "slow.log", latency_ms=120, max_concurrency=1, service_time_ms=20) as slow:
        results["slow"] = smoke(slow, base / "slow", "--max-p95-ms", "100", "--max-p99-ms", "150", "--max-error-rate",
                                "0",
                                "--min-rps", "20", "--max-p95-ms", "ep=100")
    return base, results


def test_every_gate_passes_on_a_fast_endpoint(runs):
    base, results = runs
    result = results["fast"]
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("sm-locust smoke: PASS") == 6
    assert "6 of 6 gates passed" in result.stdout
    assert all(junit_cases(base / "fast" / "junit.xml").values())
    summary = json.loads((base / "fast" / "summary.json").read_text())
    assert summary["totals"]["requests"] > 60


def test_latency_and_throughput_gates_fail_on_a_slow_endpoint(runs):
    base, results = runs
    result = results["slow"]
    assert result.returncode == 1, result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("sm-locust smoke: FAIL")]
    assert len(lines) == 4, result.stdout
    assert any(line.startswith("sm-locust smoke: FAIL p95 <= 100 ms (all requests): p95 was") for line in lines)
    assert any("FAIL p99 <= 150 ms" in line for line in lines)
    assert any("FAIL goodput >= 20 req/s" in line for line in lines)
    assert any("FAIL p95 <= 100 ms (name 'ep')" in line for line in lines)
    assert "PASS error rate <= 0.00%" in result.stdout
    cases = junit_cases(base / "slow" / "junit.xml")
    assert sorted(cases.values()) == [False, False, False, False, True, True]
    assert cases["error rate <= 0.00% (all requests)"] is True


def test_error_rate_gate_fails_on_a_failing_endpoint(endpoint_factory, tmp_path):
    failing = endpoint_factory(error_ratio=0.3, seed=7)
    result = smoke(failing, tmp_path / "run", "--max-error-rate", "0.05", "--max-p95-ms", "1000")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAIL error rate <= 5.00% (all requests): error rate was" in result.stdout
    assert "PASS p95 <= 1000 ms" in result.stdout
    suite = ET.parse(tmp_path / "run" / "junit.xml").getroot().find("testsuite")
    failure = suite.find("testcase/failure")
    assert failure is not None and "over the limit of 5.00%" in failure.get("message")
    assert suite.get("failures") == "1" and suite.get("tests") == "3"


def test_a_slow_run_regresses_against_a_fast_baseline(runs):
    base, _ = runs
    result = run_cli("smoke", "--run-dir", str(base / "slow"), "--baseline", str(base / "fast"), "--tolerance", "0.5")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAIL p95 no worse than baseline" in result.stdout and "FAIL goodput no worse than baseline" in result.stdout
    same = run_cli("smoke", "--run-dir", str(base / "fast"), "--baseline", str(base / "fast"))
    assert same.returncode == 0, same.stdout


def test_bad_gates_fail_before_any_traffic(endpoint, tmp_path):
    result = smoke(endpoint, tmp_path / "run", "--max-p95-ms", "500", "--max-p99-ms", "100")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "sm-locust: error: --max-p95-ms 500 is above --max-p99-ms 100: contradictory limits (p95 is never above p99)"]
    assert not (tmp_path / "run").exists()
    assert endpoint.stats()["requests"] == 0


def test_failures_count_when_other_gates_are_given(tmp_path):
    """smoke --max-p95-ms 500 used to pass at 18.7 % failures: the default error-rate gate stays."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"schema": 1, "totals": {
        "requests": 1000, "failures": 187, "rps": 50.0, "p95_ms": 100.0, "p99_ms": 150.0,
        "errors": {"ModelError": 187}}}))
    result = run_cli("smoke", "--run-dir", str(run), "--max-p95-ms", "500")
    assert result.returncode == 1, result.stdout + result.stderr
    assert ("FAIL error rate <= 0.00% (all requests, default: --max-error-rate to change): error rate was 18.70%"
            in result.stdout)
    assert "PASS p95 <= 500 ms" in result.stdout
    relaxed = run_cli("smoke", "--run-dir", str(run), "--max-p95-ms", "500", "--max-error-rate", "0.2")
    assert relaxed.returncode == 0, relaxed.stdout + relaxed.stderr
    assert "default" not in relaxed.stdout and "PASS error rate <= 20.00% (all requests)" in relaxed.stdout
