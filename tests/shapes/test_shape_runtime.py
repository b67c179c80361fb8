"""What ends a shaped run, through `sm-locust run` as a user types it: `-t` ends an open-loop run at T
(Locust itself ignores --run-time once a shape runs), a traffic pattern stops when IR's MaxInvocations
fires and says so, and our shapes raise no Locust warning (spawn rate > 100, options "ignored")."""

from __future__ import annotations

import json

import pytest

from tests.conftest import SAMPLE_PAYLOAD, run_cli

pytestmark = pytest.mark.e2e  # every test here starts a server, a process or Locust

WARNINGS = ("spawn rate is very high", "will be ignored", "have no impact on LoadShapes")


def _run(endpoint, out, *args, timeout=90):
    return run_cli("run", "--endpoint-name", "ep", "--endpoint-url", endpoint.url, "--payload", str(SAMPLE_PAYLOAD),
                   *args, "--out", str(out), "-q", timeout=timeout)


@pytest.mark.timeout(120)
def test_target_rps_with_run_time_ends_at_t(endpoint_factory, tmp_path):
    # 150 req/s: 150 rate tokens, more than Locust's 100 users/s warning threshold in one step.
    ep = endpoint_factory(service_time_ms=2.0)
    out = tmp_path / "open"
    result = _run(ep, out, "--target-rps", "150", "-t", "3s")
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["duration_s"] >= 2.0, summary["duration_s"]  # how close to 3 s: bench/timing.py
    assert summary["stop_reason"] == "run time 3 s reached (-t)"  # -t ended it, not the 90-s kill of run_cli
    assert "sm-locust: stopped: run time 3 s reached (-t)" in result.stdout
    assert summary["totals"]["open_loop"]["sent"] >= 150 * 1.5  # it did send, at the rate, for half of T or more
    log = (out / "locust.log").read_text()
    assert not [w for w in WARNINGS if w in log], log


@pytest.mark.timeout(120)
def test_phases_verdict_names_max_invocations(endpoint_factory, tmp_path):
    # One 10-minute level of 4 users against 4 slots x 20 ms (~9,000 invocations/min) with
    # MaxInvocations 1,000/min: the pattern stops once the level is measured, and says why.
    ep = endpoint_factory(max_concurrency=4, service_time_ms=20.0)
    pattern = {"TrafficPattern": {"TrafficType": "PHASES",
                                  "Phases": [{"InitialNumberOfUsers": 4, "SpawnRate": 0, "DurationInSeconds": 600}]},
               "StoppingConditions": {"MaxInvocations": 1000}}
    out = tmp_path / "phases"
    result = _run(ep, out, "--shape", "phases", "--traffic-pattern", json.dumps(pattern), "-t", "60s")
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((out / "summary.json").read_text())
    reason = summary["stop_reason"]
    assert reason.startswith("invocations ") and reason.endswith(">= MaxInvocations 1000/min"), reason
    assert summary["plateau"]["stop_reason"] == reason and summary["duration_s"] < 60  # before -t: the pattern
    assert f"sm-locust: stopped: {reason}" in result.stdout and "traffic pattern finished" not in result.stdout
    assert not [w for w in WARNINGS if w in (out / "locust.log").read_text()]
