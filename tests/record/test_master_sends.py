"""Open-loop sends on a master: workers ship them by the second they were scheduled in, and the master adds
them into those seconds of its timeline, so a master step's offer is measured as tightly as a local one's
(and a generator's shortfall decided there). A worker that ships totals only is still counted."""

from __future__ import annotations

import time

import locust  # noqa: F401
from locust.env import Environment
from locust.rpc.protocol import Message

from sm_locust.measure.steady import MODE_RATE, measure_step
from sm_locust.measure.timeline import Second
from sm_locust.record.recorder import MASTER_LAG_S, RunRecorder
from sm_locust.users.openloop import KEEP_SECONDS, REPORT_KEY, OpenLoopCounters
from tests.fakes import BareMaster, BareWorker, ManualClock

START = 1000
RATE = 100.0


class Worker:
    """One worker's counters, counting sends on a clock the test moves, and its Locust reports."""

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self.clock = ManualClock(float(START))
        self.counters = OpenLoopCounters(clock=self.clock)
        self.env = Environment()
        self.env.runner = BareWorker()
        self.counters.attach(self.env)

    def send(self, second: int, sent: int, dropped: int = 0) -> None:
        self.clock.now = second + 0.5
        for _ in range(sent):
            self.counters.add(sent=1)
        for _ in range(dropped):
            self.counters.add(dropped=1)

    def report(self) -> dict:
        """A worker report as the master receives it: through Locust's own message encoding."""
        data: dict = {}
        self.env.events.report_to_master.fire(client_id=self.client_id, data=data)
        return Message.unserialize(Message("stats", data, self.client_id).serialize()).data


def master_run(sends_per_second: list[int], *, lumps: bool = False, workers: int = 2) -> list[Second]:
    """A master's timeline of a run whose workers schedule `sends_per_second` (split between them) and
    report every 3 s, each at its own phase; the master samples every second and completes every send
    the second it was scheduled. `lumps`: the workers ship totals only (the old report form)."""
    env = Environment()
    env.runner = BareMaster([f"w{i}" for i in range(workers)])
    recorder = RunRecorder(env, None)
    recorder.started_at = float(START)
    counters = recorder.open_loop
    crew = [Worker(f"w{i}") for i in range(workers)]
    total = type("Total", (), {"num_reqs_per_sec": {}, "num_fail_per_sec": {}})()
    last_unkeyed = (0, 0, 0)
    end = START + len(sends_per_second)
    for now in range(START, end + MASTER_LAG_S + 1):
        if now < end:
            for i, worker in enumerate(crew):
                worker.send(now, sends_per_second[now - START] // workers + (
                    i < sends_per_second[now - START] % workers))
        for i, worker in enumerate(crew):
            if (now - START + i) % 3 == 2 or now == end + MASTER_LAG_S:  # every 3 s, the last report at the end
                data = worker.report()
                delta = data.get(REPORT_KEY)
                if lumps and delta is not None:
                    data[REPORT_KEY] = list(delta[:4])
                env.events.worker_report.fire(client_id=worker.client_id, data=data)
                for s in range(now - 3, now + 1):  # completions by second, as Locust merges them
                    if START <= s < end:
                        total.num_reqs_per_sec[s] = sends_per_second[s - START]
        unkeyed = counters.unkeyed  # as `RunRecorder.sample` reads it on a master
        sent, late, dropped = (a - b for a, b in zip(unkeyed, last_unkeyed, strict=True))
        last_unkeyed = unkeyed
        recorder._emit_master_seconds(
            Second(t=now + 0.5, users=int(RATE), spawning=False, requests=0, failures=0, hist={20: 1},
                   target_rate=RATE, sent=sent, late=late, dropped=dropped),
            total, final=now == end + MASTER_LAG_S)
    return recorder.seconds


def local_run(sends_per_second: list[int]) -> list[Second]:
    """The same sends on a local runner: each second's sample holds that second's sends."""
    return [Second(t=START + i + 1.0, users=int(RATE), spawning=False, requests=n, failures=0, hist={20: 1},
                   target_rate=RATE, sent=n, late=0, dropped=0) for i, n in enumerate(sends_per_second)]


def test_a_worker_ships_its_sends_by_the_second_they_were_scheduled_in():
    worker = Worker("w1")
    worker.send(START, 3)
    worker.send(START + 1, 2, dropped=1)
    worker.send(START + 2, 4)
    delta = worker.report()[REPORT_KEY]
    assert list(delta[:3]) == [9, 0, 1]  # the totals first: a master that reads only these still counts them
    assert [list(row) for row in delta[4]] == [[START, 3, 0, 0], [START + 1, 2, 0, 1], [START + 2, 4, 0, 0]]
    assert worker.report().get(REPORT_KEY) is None  # nothing new: nothing shipped twice

    master = OpenLoopCounters()
    master.merge_delta(delta, "w1")
    master.merge_delta([2, 0, 0, 0], "w0")  # a worker of the old form: totals only
    assert master.snapshot() == (11, 0, 1) and master.unkeyed == (2, 0, 0)
    assert master.take_seconds(START + 1) == {START: (3, 0, 0), START + 1: (2, 0, 1)}
    assert master.take_seconds() == {START + 2: (4, 0, 0)}
    assert master.take_seconds() == {}


def test_a_process_that_never_ships_keeps_only_its_latest_seconds():
    """A local runner counts by second too, and never ships: its per-second counts stay bounded."""
    worker = Worker("local")
    for second in range(START, START + KEEP_SECONDS + 30):
        worker.send(second, 1)
    assert worker.counters.snapshot() == (KEEP_SECONDS + 30, 0, 0)
    rows = worker.report()[REPORT_KEY][4]
    assert [row[0] for row in rows] == list(range(START + 30, START + KEEP_SECONDS + 30))


def test_a_masters_sends_land_in_the_seconds_they_were_scheduled_in():
    sends = [100] * 20
    timeline = master_run(sends)
    assert [int(s.t) - 1 for s in timeline] == list(range(START, START + 20))
    assert [s.sent for s in timeline] == sends  # not 3-s lumps on the seconds the reports arrived in
    assert sum(s.dropped or 0 for s in timeline) == 0


def test_a_master_steps_offered_interval_is_as_narrow_as_a_local_ones():
    sends = [95, 105, 100, 98, 102] * 6
    on_master = measure_step(master_run(sends), mode=MODE_RATE)
    local = measure_step(local_run(sends), mode=MODE_RATE)
    assert on_master.offered_rps == local.offered_rps
    assert on_master.offered_ci == local.offered_ci
    assert on_master.offered_ci.high - on_master.offered_ci.low < 0.1 * RATE
    lumped = measure_step(master_run(sends, lumps=True), mode=MODE_RATE)  # the old form: counted, but wide
    assert lumped.offered_ci.high - lumped.offered_ci.low > 5 * (local.offered_ci.high - local.offered_ci.low)


def test_a_shortfall_on_a_master_step_is_client_bound():
    sends = [78, 82, 80, 79, 81] * 6  # 80 of the 100 req/s asked for
    step = measure_step(master_run(sends), mode=MODE_RATE)
    assert step.offered_ci.high < 0.95 * RATE
    assert step.client_bound and "offered 80.1 req/s [79.7, 80.4] of the 100 req/s" in (step.client_bound_reason or "")
    lumped = measure_step(master_run(sends, lumps=True), mode=MODE_RATE)
    assert not lumped.client_bound  # the same sends in 3-s lumps decide nothing


def test_a_masters_sample_adds_keyed_sends_once():
    """`RunRecorder.sample` on a master attaches only the sends shipped without seconds: the keyed ones
    are the timeline's seconds', not counted twice."""
    from tests.fakes import SocketlessMaster

    env = Environment()
    env.runner = SocketlessMaster(env)
    recorder = RunRecorder(env, None)
    first = int(time.time()) - 10
    recorder.started_at = float(first)
    recorder._last_t = float(first)
    recorder.current_target_rate = RATE
    recorder.open_loop.merge_delta([50, 0, 0, 0, [[s, 5, 0, 0] for s in range(first, first + 10)]], "w0")
    recorder.open_loop.merge_delta([7, 0, 0, 0], "w1")
    recorder.sample()
    emitted = recorder.seconds
    assert emitted and [s.sent for s in emitted[:-1]] == [5] * (len(emitted) - 1)
    assert emitted[-1].sent == 5 + 7  # its own second's, plus the old-form worker's lump
    assert sum(s.sent or 0 for s in emitted) + sum(c[0] for c in recorder.open_loop.take_seconds().values()) == 57
