"""Master/worker correctness: a worker killed mid-run is recorded as lost while the run goes on (its
verdict INCONCLUSIVE), and `--expect-workers` that cannot be met is one line and exit 2. The cluster is the
docker-compose.yml topology run as local processes (tests/deploy/test_compose.py)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import pytest

from sm_locust.record.timeline import read_seconds
from sm_locust.record.workers import WorkerLedger, timeout_message, wait_for_final_reports
from sm_locust.util.ports import free_port
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


class FakeMaster:
    """What `wait_for_final_reports` touches of a MasterRunner: clients, server.send_to_client, stop, quit."""

    class Node:
        def __init__(self, node_id: str, state: str) -> None:
            self.id, self.state = node_id, state

    class Clients(dict):
        @property
        def all(self):
            return list(self.values())

    def __init__(self, states: dict[str, str]) -> None:
        self.clients = self.Clients({k: self.Node(k, s) for k, s in states.items()})
        self.events: list[str] = []
        self.server = self

    def send_to_client(self, message) -> None:
        self.events.append(f"{message.type} -> {message.node_id}")

    def stop(self, send_stop_to_client: bool = True) -> None:
        self.events.append(f"stop (tell workers: {send_stop_to_client})")

    def quit(self) -> None:  # Locust's own: quit to whoever is left, its fixed 0.5 s, the end
        self.events.append(f"locust quit with {sorted(self.clients)} left")

    def worker_quits(self, node_id: str) -> None:  # the worker's final report, then its quit message
        self.events.append(f"final report and quit <- {node_id}")
        del self.clients[node_id]


def test_the_master_quits_after_every_workers_final_report_not_after_a_fixed_half_second():
    import gevent

    master = FakeMaster({"w1": "running", "w2": "running", "w3": "missing"})
    wait_for_final_reports(master, wait_s=60.0)
    late = [gevent.spawn_later(0.3, master.worker_quits, "w1"), gevent.spawn_later(0.8, master.worker_quits, "w2")]
    master.quit()
    gevent.joinall(late)
    assert master.events == ["stop (tell workers: False)", "quit -> w1", "quit -> w2", "quit -> w3",
                             "final report and quit <- w1", "final report and quit <- w2",
                             "locust quit with ['w3'] left"]  # a missing worker is not waited for


def test_a_worker_that_never_answers_holds_the_quit_only_until_the_deadline():
    master = FakeMaster({"w1": "running"})
    wait_for_final_reports(master, wait_s=0.2)
    master.quit()
    assert master.events[-1] == "locust quit with ['w1'] left"


@pytest.mark.e2e
def test_a_worker_killed_mid_run_is_recorded_and_the_run_continues(tmp_path):
    topo = demo_topology(tmp_path, LOCUST_RUN_TIME="8s", LOCUST_USERS="4")
    try:
        start_cluster(topo, workers=2)
        master = topo.processes["master"]
        deadline = time.monotonic() + 120
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
    # its users stopped with it: the one step, which ended after the loss, measured less load than asked
    verdict = summary["verdict"]
    assert verdict["status"] == "inconclusive", verdict
    assert verdict["reason"].startswith(f"1 of 2 Locust workers lost ({workers['lost'][0]['id']} missing "), verdict
    assert "(give the workers more CPU, or add workers)" in verdict["reason"]
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
