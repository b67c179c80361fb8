"""The load generator's CPU wait on every process: schedstat read from synthetic files, each worker's
own pair (ran, waited) shipped to the master, and the master's seconds and steps judging each worker
on its own pair."""

from __future__ import annotations

import json

import locust  # noqa: F401
from locust.env import Environment

import pytest

from sm_locust.measure.looplag import starved_reason
from sm_locust.measure.steady import measure_step
from sm_locust.measure.timeline import Second
from sm_locust.measure.workercpu import WorkerCpu, judged, window_pair, workers_from_json
from sm_locust.record.accumulate import _Block
from sm_locust.record.recorder import RunRecorder
from sm_locust.record.schedwait import SchedWait, WorkerWaits
from sm_locust.record.schema import summary_problem
from sm_locust.record.summary import iso, step_line, step_record
from sm_locust.record.timeline import read_seconds
from tests.conftest import SAMPLE_PAYLOAD, run_cli
from tests.fakes import BareMaster, BareWorker


def environment(runner):
    env = Environment()
    env.runner = runner
    return env


class FakeSched(SchedWait):
    """A worker's schedstat: `pairs` are the (ran, waited) shares (%) it reports, one per call after the baseline."""

    def __init__(self, pairs):
        super().__init__()
        self.pairs = [None, *pairs]

    def shares(self):
        return self.pairs.pop(0) if self.pairs else None


def ship(worker, client_id, master):
    """One worker report: what `worker` puts in it, merged on `master`."""
    report: dict = {}
    worker._on_report_to_master(client_id=client_id, data=report)
    master._on_worker_report(client_id=client_id, data=report)
    return report


def test_schedstat_run_and_wait_are_shares_of_wall_time_between_calls(tmp_path):
    stat = tmp_path / "schedstat"
    stat.write_text("5000000 1000000000 40\n")
    clock = iter([10.0, 12.0, 13.0, 14.0])
    sched = SchedWait(str(stat), clock=lambda: next(clock))
    assert sched.shares() is None  # the baseline
    stat.write_text("605000000 1500000000 41\n")  # ran 0.6 s and waited 0.5 s of 2 s
    assert sched.shares() == (30.0, 25.0)
    stat.write_text("705000000 3500000000 42\n")  # waited 2 s in 1 s: capped
    assert sched.shares() == (10.0, 100.0)
    stat.write_text("705000000 3600000000 43\n")
    assert sched.percent() == 10.0  # the wait alone: the local recorder's
    assert SchedWait(str(tmp_path / "missing")).shares() is None


def test_workers_ship_their_own_pair_and_the_master_keeps_each_workers_last():
    w1, w2 = WorkerWaits(FakeSched([(30.0, 2.0), (25.0, 3.0)])), WorkerWaits(FakeSched([(6.0, 40.0)]))
    w1.attach(environment(BareWorker()))
    w2.attach(environment(BareWorker()))
    master = WorkerWaits(FakeSched([]))
    master.attach(environment(BareMaster()))
    for waits in (w1, w2, master):
        waits.reset()
    assert master.pairs(["w1", "w2"]) is None  # nothing reported yet
    assert ship(w1, "w1", master) == {WorkerWaits.REPORT_KEY: {"run": 30.0, "wait": 2.0}}
    ship(w2, "w2", master)
    assert master.pairs(["w1", "w2"]) == (WorkerCpu("w1", 30.0, 2.0), WorkerCpu("w2", 6.0, 40.0))
    assert master.pairs(["w1"]) == (WorkerCpu("w1", 30.0, 2.0),)  # w2 gone: its pair no longer judges
    ship(w1, "w1", master)
    assert master.pairs(["w1"]) == (WorkerCpu("w1", 25.0, 3.0),)  # the last report's pair, not the run's worst
    for junk in ("x", True, float("nan"), None, 12.0, {"a": 1}, {"run": 5.0}, {"run": "5", "wait": 1.0},
                 {"run": float("inf"), "wait": 1.0}):
        master._on_worker_report(client_id="w1", data={WorkerWaits.REPORT_KEY: junk})
    assert master.pairs(["w1"]) == (WorkerCpu("w1", 25.0, 3.0),)  # not what a worker of this version sends
    master._on_worker_report(client_id="w1", data={WorkerWaits.REPORT_KEY: {"run": 140.0, "wait": -3}})
    assert master.pairs(["w1"]) == (WorkerCpu("w1", 100.0, 0.0),)  # clamped to a share
    master.reset()
    assert master.pairs(["w1", "w2"]) is None  # a new test forgets the last one's


class Heartbeat:
    def __init__(self, cpu_usage):
        self.cpu_usage = cpu_usage


def test_a_master_second_carries_one_workers_own_pair_not_the_busiest_cpu_beside_the_longest_wait():
    """Worker A ran 30 % and waited 2 %, worker B ran 6 % and waited 40 %: the second is B's own pair
    (starved), never A's CPU beside B's wait (30 % and 40 %: within 1.5 times, judged fine)."""
    env = environment(BareMaster(["A", "B"]))
    recorder = RunRecorder(env, None)
    recorder._sched = FakeSched([(1.0, 99.0)] * 5)  # the master's own figures never judge
    recorder.worker_waits.workers = {"A": WorkerCpu("A", 30.0, 2.0), "B": WorkerCpu("B", 6.0, 40.0),
                                     "gone": WorkerCpu("gone", 10.0, 80.0)}
    cpu, wait, workers = recorder._client_figures(env.runner)
    assert (cpu, wait) == (6.0, 40.0)
    assert workers == (WorkerCpu("A", 30.0, 2.0), WorkerCpu("B", 6.0, 40.0))
    assert starved_reason(30.0, 40.0) is None and starved_reason(cpu, wait) is not None


def test_a_master_without_shipped_pairs_reads_the_busiest_workers_heartbeat_cpu():
    env = environment(BareMaster([]))
    env.runner.clients = {"A": Heartbeat(12.0), "B": Heartbeat(31.0)}
    recorder = RunRecorder(env, None)
    assert recorder._client_figures(env.runner) == (31.0, None, None)


def test_a_master_step_is_judged_on_each_workers_own_pair_averaged_over_its_window():
    """Per second the busiest worker alternates; over the step, A (30 %, 2 %) and B (6 %, 40 %) each
    averaged: the step is starved on B's own pair, and says so, naming B."""
    seconds = []
    for i in range(20):
        b_wait = 44.0 if i % 2 else 36.0
        workers = (WorkerCpu("A", 30.0, 2.0), WorkerCpu("B", 6.0, b_wait))
        seconds.append(Second(t=1000.0 + i + 1, users=8, spawning=False, requests=100, failures=0,
                              hist={20: 100}, client_cpu_pct=30.0, client_wait_pct=b_wait, client_workers=workers))
    step = measure_step(seconds)
    assert (step.client_cpu_pct, step.client_wait_pct, step.client_worker) == (6.0, 40.0, "B")
    assert step.client_bound_reason == starved_reason(6.0, 40.0)
    record = step_record(step)
    assert (record["client_cpu_pct"], record["client_wait_pct"], record["client_worker"]) == (6.0, 40.0, "B")
    assert step_line(1, record).endswith(f"client CPU 6 %, waited for a CPU 40 % (worker B) CLIENT-BOUND: "
                                         f"{starved_reason(6.0, 40.0)}")
    quiet = measure_step([Second(t=s.t, users=8, spawning=False, requests=100, failures=0, hist={20: 100},
                                 client_workers=(WorkerCpu("A", 30.0, 2.0), WorkerCpu("B", 6.0, 4.0)))
                          for s in seconds])
    assert (quiet.client_cpu_pct, quiet.client_wait_pct, quiet.client_worker, quiet.client_bound) == (
        30.0, 2.0, "A", False)  # none starved: the worker that ran and waited most


def test_judged_takes_a_starved_worker_first_else_the_busiest():
    a, b, c = WorkerCpu("A", 85.0, 3.0), WorkerCpu("B", 8.0, 20.0), WorkerCpu("C", 7.0, 30.0)
    assert judged([a, b, c]) == c  # B and C both starved: the one that waited most
    assert judged([a, WorkerCpu("B", 8.0, 9.0)]) == a
    assert judged([WorkerCpu("A", None, 50.0), WorkerCpu("B", 2.0, 3.0)]).worker == "A"  # no CPU: not judged starved
    assert judged([]) is None
    pair, cpu_max = window_pair([[a, WorkerCpu("B", 10.0, 30.0)], [WorkerCpu("A", 75.0, 5.0)],
                                 [WorkerCpu("B", 6.0, 20.0)]])
    assert (pair, cpu_max) == (WorkerCpu("B", 8.0, 25.0), 10.0)  # each worker over the seconds that carried it


def test_worker_pairs_round_trip_the_timeline_and_survive_merged_blocks():
    workers = (WorkerCpu("A", 30.0, 2.0), WorkerCpu("B", None, 40.0))
    second = Second(t=5.0, users=2, spawning=False, requests=3, failures=0, client_workers=workers)
    assert Second.from_dict(json.loads(json.dumps(second.as_dict()))).client_workers == workers
    assert "client_workers" not in Second(t=5.0, users=2, spawning=False, requests=3, failures=0).as_dict()
    assert workers_from_json({"A": [1.0, 2.0], "B": "x", "C": [1.0]}) == (WorkerCpu("A", 1.0, 2.0),)
    block = _Block(Second(t=1.0, users=2, spawning=False, requests=1, failures=0,
                          client_workers=(WorkerCpu("A", 30.0, 2.0),)))
    block.merge(_Block(Second(t=2.0, users=2, spawning=False, requests=1, failures=0,
                              client_workers=(WorkerCpu("A", 10.0, 4.0), WorkerCpu("B", 6.0, 40.0)))))
    assert block.second().client_workers == (WorkerCpu("A", 20.0, 3.0), WorkerCpu("B", 6.0, 40.0))


@pytest.mark.e2e
def test_a_processes_2_run_records_each_workers_own_pair_and_judges_its_steps_on_one(endpoint, tmp_path):
    """`--processes 2` against a local endpoint: the master's seconds carry both workers' pairs from
    their schedstat, and each step's `client_cpu_pct` / `client_wait_pct` are the pair of the worker it
    names, as its own seconds averaged them."""
    out = tmp_path / "run"
    result = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", endpoint.url, "--payload",
                     str(SAMPLE_PAYLOAD), "-u", "4", "-r", "100", "-t", "12s", "--processes", "2", "--out", str(out),
                     "-q")
    assert result.returncode in (0, 1), result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary_problem(summary) is None
    seconds = read_seconds(out / "timeline.jsonl")
    paired = [s for s in seconds if s.client_workers]
    assert paired, "no second carried the workers' pairs"
    assert {len(s.client_workers) for s in paired} <= {1, 2} and max(len(s.client_workers) for s in paired) == 2
    for s in paired:  # a second's figures are one worker's own pair, the worker judged
        assert (s.client_cpu_pct, s.client_wait_pct) == (judged(s.client_workers).cpu_pct,
                                                          judged(s.client_workers).wait_pct)
    (step,) = [st for st in summary["steps"] if st.get("judged") is not False]
    window = [s for s in seconds if s.client_workers
              and step["start"] <= iso(s.t - s.interval) and iso(s.t) <= step["end"]]
    named = {w.worker for s in window for w in s.client_workers}
    assert step["client_worker"] in named
    own = [w for s in window for w in s.client_workers if w.worker == step["client_worker"]]
    assert min(w.cpu_pct for w in own) <= step["client_cpu_pct"] <= max(w.cpu_pct for w in own)
    assert min(w.wait_pct for w in own) <= step["client_wait_pct"] <= max(w.wait_pct for w in own)
