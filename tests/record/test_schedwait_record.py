"""The load generator's CPU wait on every process: schedstat read from synthetic files, each worker's
share shipped to the master, and the master's seconds judging the worker that waited most."""

from __future__ import annotations

import locust  # noqa: F401
from locust.env import Environment

from sm_locust.record.recorder import RunRecorder
from sm_locust.record.schedwait import SchedWait, WorkerWaits
from tests.fakes import BareMaster, BareWorker


def environment(runner):
    env = Environment()
    env.runner = runner
    return env


class FakeSched(SchedWait):
    """A worker's schedstat: `waits` are the shares (%) it reports, one per call after the baseline."""

    def __init__(self, waits):
        super().__init__()
        self.waits = [None, *waits]

    def percent(self):
        return self.waits.pop(0) if self.waits else None


def test_schedstat_wait_is_a_share_of_wall_time_between_calls(tmp_path):
    stat = tmp_path / "schedstat"
    stat.write_text("5000000 1000000000 40\n")
    clock = iter([10.0, 12.0, 13.0])
    sched = SchedWait(str(stat), clock=lambda: next(clock))
    assert sched.percent() is None  # the baseline
    stat.write_text("5000000 1500000000 41\n")  # waited 0.5 s of 2 s
    assert sched.percent() == 25.0
    stat.write_text("5000000 3500000000 42\n")  # 2 s in 1 s: capped
    assert sched.percent() == 100.0
    assert SchedWait(str(tmp_path / "missing")).percent() is None


def test_workers_ship_their_wait_and_the_master_takes_the_one_waiting_most():
    w1, w2 = WorkerWaits(FakeSched([12.0, 3.0])), WorkerWaits(FakeSched([40.0]))
    w1.attach(environment(BareWorker()))
    w2.attach(environment(BareWorker()))
    master = WorkerWaits(FakeSched([]))
    master.attach(environment(BareMaster()))
    for waits in (w1, w2, master):
        waits.reset()
    assert master.most(["w1", "w2"]) is None  # nothing reported yet
    for client_id, waits in (("w1", w1), ("w2", w2)):
        report: dict = {}
        waits._on_report_to_master(client_id=client_id, data=report)
        master._on_worker_report(client_id=client_id, data=report)
    assert master.most(["w1", "w2"]) == 40.0
    assert master.most(["w1"]) == 12.0  # w2 gone: its share no longer judges
    report = {}
    w1._on_report_to_master(client_id="w1", data=report)
    master._on_worker_report(client_id="w1", data=report)
    assert master.most(["w1"]) == 3.0  # the last report's share, not the run's worst
    for junk in ("x", True, float("nan"), None, {"a": 1}):
        master._on_worker_report(client_id="w1", data={WorkerWaits.REPORT_KEY: junk})
    assert master.most(["w1"]) == 3.0  # not what a worker of this version sends: ignored
    master.reset()
    assert master.most(["w1", "w2"]) is None  # a new test forgets the last one's


def test_a_master_second_carries_the_workers_wait_not_its_own():
    env = environment(BareMaster(["w1", "w2"]))
    recorder = RunRecorder(env, None)
    recorder._sched = FakeSched([99.0] * 5)  # the master's own wait never judges
    recorder.worker_waits.workers = {"w1": 7.5, "w2": 31.0, "gone": 80.0}
    assert recorder._client_wait(env.runner) == 31.0
