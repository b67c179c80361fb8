"""Master/worker correctness: a worker killed mid-run is recorded as lost while the run goes on,
and `--expect-workers` that cannot be met is one line and exit 2. The cluster is the
docker-compose.yml topology run as local processes (tests/deploy/test_compose.py)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import pytest

from sm_locust.endpoint.server import free_port
from sm_locust.record.timeline import read_seconds
from sm_locust.record.workers import WorkerLedger, timeout_message
from tests.conftest import ROOT, SAMPLE_PAYLOAD, assert_one_line_error, run_cli
from tests.fakes import wait_exit
from tests.topology import demo_topology, endpoint_stats, start_cluster


def test_ledger_records_missing_and_quit_workers():
    ledger = WorkerLedger(expected=3)
    ledger.start(100.0, {"a": "running", "b": "running", "c": "running"})
    ledger.observe(102.0, {"a": "running", "b": "missing", "c": "running"})
    ledger.observe(103.0, {"a": "running", "b": "missing"})
    ledger.observe(104.0, {"a": "running"})  # b removed after going missing: not lost twice
    assert ledger.as_dict() == {"expected": 3, "connected": 3, "at_end": 1, "lost": [
        {"id": "b", "reason": "missing", "after_s": 2.0}, {"id": "c", "reason": "quit", "after_s": 3.0}]}


@pytest.mark.e2e
def test_a_worker_killed_mid_run_is_recorded_and_the_run_continues(tmp_path):
    topo = demo_topology(tmp_path, LOCUST_RUN_TIME="8s", LOCUST_USERS="4")
    try:
        start_cluster(topo, workers=2)
        master = topo.processes["master"]
        deadline = time.monotonic() + 30
        while "2 workers connected" not in topo.log("master"):  # the headless run starts right then
            assert time.monotonic() < deadline, topo.log("master")[-2000:]
            time.sleep(0.1)
        time.sleep(2.0)
        os.killpg(topo.processes["worker2"].pid, signal.SIGKILL)  # no goodbye: the master must notice
        wait_exit(master, 60)
        served = endpoint_stats(topo)
    finally:
        topo.stop_all()
    assert master.returncode == 0, topo.log("master")[-3000:]
    summary = json.loads((tmp_path / "reports" / "run" / "summary.json").read_text())
    workers = summary["workers"]
    assert workers["expected"] == 2 and workers["connected"] == 2 and workers["at_end"] == 1
    assert [entry["reason"] for entry in workers["lost"]] == ["missing"]
    assert workers["lost"][0]["id"].endswith(tuple("0123456789abcdef"))
    assert "lost (missing)" in topo.log("master")
    # the run went on to its end with the remaining worker's users
    assert summary["duration_s"] >= 7.5
    timeline = read_seconds(tmp_path / "reports" / "run" / "timeline.jsonl")
    assert sum(s.requests for s in timeline[-4:]) > 0  # workers report every 3 s
    assert summary["totals"]["requests"] <= served["requests"]


@pytest.mark.e2e
def test_expect_workers_timeout_is_one_line_exit_2(tmp_path):
    port = free_port()
    result = __import__("subprocess").run(
        [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "sagemaker.py"), "--master", "--headless",
         "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port), "--expect-workers", "2",
         "--expect-workers-max-wait", "1", "-t", "3s", "--only-summary", "--endpoint-name", "ep", "--payload",
         str(SAMPLE_PAYLOAD)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if "error" in line.lower()]
    assert errors == [timeout_message(0, 2, 1.0)], errors
    assert "Traceback" not in result.stderr


@pytest.mark.e2e
def test_smoke_keeps_exit_2_when_workers_never_connect(endpoint, tmp_path):
    port = free_port()
    result = run_cli("smoke", "--endpoint-name", "ep", "--endpoint-url", endpoint.url, "--payload", str(SAMPLE_PAYLOAD),
                     "-t", "3s", "--out", str(tmp_path / "run"), "--", "--master", "--master-bind-host", "127.0.0.1",
                     "--master-bind-port", str(port), "--expect-workers", "1", "--expect-workers-max-wait", "1")
    assert_one_line_error(result, 2, "only 0 of 1 workers connected")
