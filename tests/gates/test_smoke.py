"""`sm-locust smoke` end to end: each gate passes on a fast local endpoint and fails on one made slow
(--latency-ms), short of capacity (--max-concurrency / --service-time-ms) or failing
(--error-ratio); the JUnit XML is parsed back; a slow run regresses against a fast baseline."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from contextlib import ExitStack

import pytest

from tests.conftest import SAMPLE_PAYLOAD, run_cli
from tests.starved import gates_held_by_the_load_generator


def smoke_args(endpoint, out, *gates: str, seconds: str = "3s", users: str = "2") -> list[str]:
    return ["smoke", "--endpoint-name", "ep", "--endpoint-url", endpoint.url, "--payload", str(SAMPLE_PAYLOAD),
            "-u", users, "-r", "20", "-t", seconds, "--out", str(out), *gates, "--junit", str(out / "junit.xml")]


def smoke(endpoint, out, *gates: str, seconds: str = "3s", users: str = "2"):
    return run_cli(*smoke_args(endpoint, out, *gates, seconds=seconds, users=users))


def held(base, name: str, result, baseline: str | None = None) -> bool:
    """The run's (or its baseline's) verdict is a verified load-generator INCONCLUSIVE (a starved CI
    machine) and every gate on its figures said so, exit 1: the right answer there (tests/starved.py);
    False: judge the gates."""
    summary = json.loads((base / name / "summary.json").read_text())
    against = json.loads((base / baseline / "summary.json").read_text()) if baseline else None
    if not gates_held_by_the_load_generator(summary, result.stdout, baseline=against):
        return False
    assert result.returncode == 1, result.stdout + result.stderr
    return True


def junit_cases(path) -> dict[str, bool]:
    suite = ET.parse(path).getroot().find("testsuite")
    return {case.get("name"): case.find("failure") is None for case in suite.findall("testcase")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A fast, a slow and a failing smoke run, shared by the gate tests below. Each has its own endpoint and
    run folder, so the three run at once (one wait for Locust's start-up instead of three). The fast one
    runs 8 s: its per-second samples make 4 batches, so the goodput gate's interval (Student's t with 3
    degrees of freedom) decides; 3 s make 2 batches and t(1) = 12.7 leaves it INCONCLUSIVE, rightly."""
    from sm_locust.endpoint.server import LocalEndpoint

    base = tmp_path_factory.mktemp("smoke")
    plans = {
        "fast": ({}, ("--max-p95-ms", "200", "--max-p99-ms", "400", "--max-error-rate", "0", "--min-rps", "20",
                      "--max-p95-ms", "ep=200")),
        "slow": ({"latency_ms": 120, "max_concurrency": 1, "service_time_ms": 20},
                 ("--max-p95-ms", "100", "--max-p99-ms", "150", "--max-error-rate", "0", "--min-rps", "20",
                  "--max-p95-ms", "ep=100")),
        "failing": ({"error_ratio": 0.3, "seed": 7}, ("--max-error-rate", "0.05", "--max-p95-ms", "1000")),
    }
    with ExitStack() as stack:
        started = {}
        for name, (settings, gates) in plans.items():
            ep = stack.enter_context(LocalEndpoint(log_path=base / f"{name}.log", **settings))
            argv = smoke_args(ep, base / name, *gates, seconds="8s" if name == "fast" else "3s")
            started[name] = subprocess.Popen([sys.executable, "-m", "sm_locust", *argv],
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            stack.callback(lambda proc=started[name]: proc.poll() is None and proc.kill())  # a run that hung
        results = {}
        for name, proc in started.items():
            stdout, stderr = proc.communicate(timeout=120)
            results[name] = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    return base, results


@pytest.mark.e2e
def test_every_gate_passes_on_a_fast_endpoint(runs):
    base, results = runs
    result = results["fast"]
    summary = json.loads((base / "fast" / "summary.json").read_text())
    assert summary["totals"]["requests"] > 60
    if held(base, "fast", result):
        assert "1 of 6 gates passed, 5 inconclusive" in result.stdout
        assert sorted(junit_cases(base / "fast" / "junit.xml").values()) == [False] * 5 + [True]
        return
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("sm-locust smoke: PASS") == 6
    assert "6 of 6 gates passed" in result.stdout
    assert all(junit_cases(base / "fast" / "junit.xml").values())


@pytest.mark.e2e
def test_latency_and_throughput_gates_fail_on_a_slow_endpoint(runs):
    base, results = runs
    result = results["slow"]
    assert result.returncode == 1, result.stdout + result.stderr
    if held(base, "slow", result):
        assert "1 of 6 gates passed, 5 inconclusive" in result.stdout
        return
    # 3-s runs: a gate whose figure's interval straddles its limit is INCONCLUSIVE, never a PASS; each of
    # these four fails the run one way or the other (a 3-s run of a 120-ms endpoint decides the latency)
    lines = [line for line in result.stdout.splitlines()
             if line.startswith(("sm-locust smoke: FAIL", "sm-locust smoke: INCONCLUSIVE"))]
    assert len(lines) == 4, result.stdout
    assert any(line.startswith("sm-locust smoke: FAIL p95 <= 100 ms (all requests): p95 ") for line in lines)
    assert any("p99 <= 150 ms" in line for line in lines)
    assert any("goodput >= 20 req/s" in line for line in lines)
    assert any("FAIL p95 <= 100 ms (name 'ep')" in line for line in lines)
    assert "PASS error rate <= 0.00%" in result.stdout
    cases = junit_cases(base / "slow" / "junit.xml")
    assert sorted(cases.values()) == [False, False, False, False, True, True]
    assert cases["error rate <= 0.00% (all requests)"] is True


@pytest.mark.e2e
def test_error_rate_gate_fails_on_a_failing_endpoint(runs):
    base, results = runs
    result = results["failing"]
    assert result.returncode == 1, result.stdout + result.stderr
    if held(base, "failing", result):
        assert "1 of 3 gates passed, 2 inconclusive" in result.stdout
        return
    assert "FAIL error rate <= 5.00% (all requests): error rate was" in result.stdout
    assert "PASS p95 <= 1000 ms" in result.stdout
    suite = ET.parse(base / "failing" / "junit.xml").getroot().find("testsuite")
    failure = suite.find("testcase/failure")
    assert failure is not None and "over the limit of 5.00%" in failure.get("message")
    assert suite.get("failures") == "1" and suite.get("tests") == "3"


@pytest.mark.e2e
def test_a_slow_run_regresses_against_a_fast_baseline(runs):
    base, _ = runs
    result = run_cli("smoke", "--run-dir", str(base / "slow"), "--baseline", str(base / "fast"), "--tolerance", "0.5")
    assert result.returncode == 1, result.stdout + result.stderr
    if not held(base, "slow", result, baseline="fast"):
        assert "FAIL p95 vs baseline" in result.stdout and "FAIL goodput vs baseline" in result.stdout
        assert "beyond the 50% tolerance" in result.stdout  # 3-s runs: too short for an interval, said so
    same = run_cli("smoke", "--run-dir", str(base / "fast"), "--baseline", str(base / "fast"))
    if not held(base, "fast", same, baseline="fast"):
        assert same.returncode == 0, same.stdout


@pytest.mark.e2e
def test_bad_gates_fail_before_any_traffic(endpoint, tmp_path):
    result = smoke(endpoint, tmp_path / "run", "--max-p95-ms", "500", "--max-p99-ms", "100")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "sm-locust: error: --max-p95-ms 500 is above --max-p99-ms 100: contradictory limits (p95 is never above p99)"]
    assert not (tmp_path / "run").exists()
    assert endpoint.stats()["requests"] == 0


@pytest.mark.e2e
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
