"""A master appends second S of its timeline once every live worker's report watermark (the last second,
by that worker's own clock, its reports hold whole) has reached S; its fixed lag stays the upper bound
for a worker that sends none (an older release), stalls, or is being lost. Fed synthetic reports:
skewed worker clocks, a silent worker, a lost one; the worker side through Locust's own stats listener."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import locust.log
import locust.runners
import locust.stats
from locust.env import Environment
from locust.rpc.protocol import Message
from locust.stats import setup_distributed_stats_event_listeners

import pytest

from sm_locust.measure.timeline import Second
from sm_locust.record.recorder import MASTER_LAG_S, RunRecorder
from sm_locust.record.watermark import (
    REPORT_INTERVAL_S,
    ReportWatermarks,
    appendable_through,
    live_workers,
    report_every_second,
)
from tests.fakes import BareMaster, BareWorker, ManualClock

LAG = MASTER_LAG_S


# -- the rule ----------------------------------------------------------------------------------------

def test_a_second_is_appended_once_every_live_worker_has_reported_it_whole():
    marks = {"a": 997, "b": 998}
    assert appendable_through(1000, marks, ["a", "b"], LAG) == 997  # the slower worker holds it
    assert appendable_through(1000, {"a": 999, "b": 999}, ["a", "b"], LAG) == 999  # 1 s, not 4
    assert appendable_through(1000, {"a": 990, "b": 999}, ["a", "b"], LAG) == 1000 - LAG  # the lag bounds it


def test_skewed_clocks_are_each_the_workers_own():
    """A worker whose clock runs ahead reports later seconds whole; the master never appends a second
    that has not ended by its own clock, and the worker behind holds the rest."""
    assert appendable_through(1000, {"ahead": 1004, "behind": 998}, ["ahead", "behind"], LAG) == 998
    assert appendable_through(1000, {"ahead": 1004}, ["ahead"], LAG) == 999


def test_a_silent_worker_holds_the_master_to_its_lag():
    assert appendable_through(1000, {"a": 999}, ["a", "old-release"], LAG) == 1000 - LAG
    assert appendable_through(1000, {}, [], LAG) == 1000 - LAG  # no worker: nothing more can arrive early


def test_a_worker_marked_missing_no_longer_holds_seconds_back():
    clients = {"a": SimpleNamespace(state="running"), "lost": SimpleNamespace(state=locust.runners.STATE_MISSING)}
    assert live_workers(clients) == ["a"]
    assert appendable_through(1000, {"a": 999, "lost": 990}, live_workers(clients), LAG) == 999


def test_a_watermark_only_moves_forward_and_a_foreign_one_is_ignored():
    marks = ReportWatermarks()
    marks.merge_delta(1005, "a")
    marks.merge_delta(1003, "a")  # a report overtaken in flight (none is, on one connection): not backwards
    marks.merge_delta("1010", "b")
    marks.merge_delta(True, "c")
    assert marks.marks == {"a": 1005}
    marks.reset()
    assert marks.marks == {}


# -- the worker side, through Locust's own stats listener ---------------------------------------------

def worker_env(monkeypatch, clock: ManualClock, locust_first: bool = True) -> Environment:
    """A worker's environment: Locust's stats listener registered as its runner does, the watermark as the
    locustfile's init does (after it, or before with `locust_first=False`); Locust's stats on `clock`."""
    monkeypatch.setattr(locust.stats, "time", SimpleNamespace(time=clock))
    monkeypatch.setattr(locust.runners, "WORKER_REPORT_INTERVAL", locust.runners.WORKER_REPORT_INTERVAL)
    env = Environment()
    env.runner = BareWorker()
    if locust_first:
        setup_distributed_stats_event_listeners(env.events, env.stats)
    ReportWatermarks().attach(env)
    if not locust_first:
        setup_distributed_stats_event_listeners(env.events, env.stats)
    return env


def report(env: Environment) -> dict:
    data: dict = {}
    env.events.report_to_master.fire(client_id="w", data=data)
    return Message.unserialize(Message("stats", data, "w").serialize()).data


@pytest.mark.parametrize("locust_first", [True, False])
def test_every_request_of_a_second_up_to_the_watermark_is_in_the_reports_so_far(monkeypatch, locust_first):
    clock = ManualClock(100.2)
    env = worker_env(monkeypatch, clock, locust_first)
    shipped: dict[int, int] = {}
    marks = []
    reported = 0.0
    for now in [100.2 + 0.1 * i for i in range(60)]:  # a request every 0.1 s, a report every 0.7 s
        clock.now = now
        env.stats.log_request("POST", "ep", 10, 100)
        if round(now * 10) % 7 == 0:
            data = report(env)
            for second, count in data["stats_total"]["num_reqs_per_sec"].items():
                shipped[int(second)] = shipped.get(int(second), 0) + count
            mark = data[ReportWatermarks.REPORT_KEY]
            marks.append(mark)
            reported = now
            assert mark <= int(now) - 1  # never the second under way
            for second in range(100, mark + 1):
                assert shipped.get(second, 0) == (8 if second == 100 else 10), second  # whole
    assert marks == sorted(marks) and marks[-1] >= 104
    if locust_first:  # the moment of this report: the second before it
        assert marks[-1] == int(reported) - 1


def test_a_worker_reports_every_second_and_locusts_loop_reads_it(monkeypatch):
    """The interval is set once, on workers only, and Locust's worker loop sleeps what it is set to: a
    Locust that stopped reading the module's value there (an upgrade) fails this."""
    monkeypatch.setattr(locust.runners, "WORKER_REPORT_INTERVAL", 3.0)
    master = Environment()
    master.runner = BareMaster(["w"])
    report_every_second(master)
    assert locust.runners.WORKER_REPORT_INTERVAL == 3.0  # a master or local runner leaves it alone
    worker = Environment()
    worker.runner = BareWorker()
    report_every_second(worker)
    assert locust.runners.WORKER_REPORT_INTERVAL == REPORT_INTERVAL_S == 1.0

    monkeypatch.setattr(locust.runners, "WORKER_REPORT_INTERVAL", 3.0)  # and the locustfile's init does it
    from sm_locust.locustfiles.sagemaker import _attach_report_watermarks
    worker = Environment()
    worker.runner = BareWorker()
    _attach_report_watermarks(worker)
    assert locust.runners.WORKER_REPORT_INTERVAL == REPORT_INTERVAL_S
    assert isinstance(getattr(worker, ReportWatermarks.ATTRIBUTE), ReportWatermarks)

    slept: list[float] = []

    class Stop(Exception):
        pass

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 2:
            raise Stop

    monkeypatch.setattr(locust.runners.gevent, "sleep", sleep)
    sends = SimpleNamespace(count=0)
    reporter = SimpleNamespace(_send_stats=lambda: setattr(sends, "count", sends.count + 1))
    with pytest.raises(Stop):
        locust.runners.WorkerRunner.stats_reporter(reporter)  # type: ignore[arg-type]
    assert slept == [REPORT_INTERVAL_S, REPORT_INTERVAL_S] and sends.count == 2


# -- a master's timeline fed synthetic reports -----------------------------------------------------------

START = 1000
RPS = 10  # each worker completes a request every 0.1 s of its own clock


@dataclass
class SimWorker:
    """A worker completing RPS requests a second keyed by its own clock (`offset` from the master's) from
    `starts`, reporting every `interval` s from `phase` (master clock) while `reports_until` (None: always:
    a worker lost then stops both)."""

    name: str
    offset: float = 0.0
    starts: float = START
    interval: float = 1.0
    phase: float = 0.0
    watermark: bool = True
    reports_until: float | None = None
    unreported: dict[int, int] = field(default_factory=dict)

    def complete(self, now: float) -> None:
        second = int(now + self.offset + 1e-9)
        self.unreported[second] = self.unreported.get(second, 0) + 1

    def reports_at(self, now: float) -> bool:
        if self.reports_until is not None and now > self.reports_until:
            return False
        ticks = (now - START - self.phase) / self.interval
        return ticks >= 0 and abs(ticks - round(ticks)) < 1e-6

    def report(self, now: float) -> dict:
        data: dict = {"counts": self.unreported}
        self.unreported = {}
        if self.watermark:
            data[ReportWatermarks.REPORT_KEY] = int(now + self.offset + 1e-9) - 1
        return data


def master_timeline(workers: list[SimWorker], seconds: int = 30, missing: dict[str, float] | None = None):
    """Run a master recorder over `seconds` of master clock in 0.1-s ticks, sampling every second (at
    x.5) and appending at a report that moved a watermark; `missing`: when Locust marks a worker
    missing. Returns (the timeline, each second's append delay after it ended by the master's clock)."""
    env = Environment()
    env.runner = BareMaster([w.name for w in workers])
    env.runner.clients = {w.name: SimpleNamespace(state="running") for w in workers}
    recorder = RunRecorder(env, None)
    recorder.started_at = float(START)
    clock = ManualClock(float(START))
    recorder.clock = clock
    total = env.stats.total  # where Locust merges the workers' counts
    locust.log.unhandled_greenlet_exception = False
    appended_at: dict[int, float] = {}

    def appended(before: int) -> None:
        for second in recorder.seconds[before:]:
            appended_at[int(second.t) - 1] = clock.now - second.t

    for tick in range(seconds * 10 + 1):
        now = clock.now = START + tick / 10
        for worker in workers:
            if worker.starts <= now and (worker.reports_until is None or now <= worker.reports_until):
                worker.complete(now)
            if worker.reports_at(now):
                data = worker.report(now)
                for second, count in data.pop("counts").items():
                    total.num_reqs_per_sec[second] += count
                before = len(recorder.seconds)
                env.events.worker_report.fire(client_id=worker.name, data=data)  # may append at once
                appended(before)
        for name, at in (missing or {}).items():
            if now >= at:
                env.runner.clients[name].state = locust.runners.STATE_MISSING
        if tick % 10 == 5:
            before = len(recorder.seconds)
            recorder._emit_master_seconds(Second(t=now, users=2 * RPS, spawning=False, requests=0, failures=0),
                                          total, final=False)
            appended(before)
    assert not locust.log.unhandled_greenlet_exception  # no listener failed
    return recorder.seconds, appended_at


def test_two_workers_with_skewed_clocks_each_second_appended_whole_and_sooner():
    workers = [SimWorker("ahead", offset=1.5, phase=0.3), SimWorker("behind", offset=-0.8, phase=0.8)]
    timeline, delays = master_timeline(workers)
    assert [int(s.t) - 1 for s in timeline] == list(range(START, START + len(timeline)))  # each once, in order
    whole = [s for s in timeline if int(s.t) - 1 >= START + 2]  # both workers ran all of it
    assert whole and all(s.requests == 2 * RPS for s in whole)
    assert max(delays[int(s.t) - 1] for s in whole) < LAG - 1  # not held the fixed lag
    fixed, fixed_delays = master_timeline([SimWorker("ahead", offset=1.5, phase=0.3, watermark=False),
                                           SimWorker("behind", offset=-0.8, phase=0.8, watermark=False)])
    assert min(fixed_delays.values()) > max(delays.values())
    assert [s.requests for s in fixed] == [s.requests for s in timeline][:len(fixed)]  # the same counts, sooner


def test_a_second_is_appended_when_the_last_report_of_it_arrives_not_at_the_next_sample():
    timeline, delays = master_timeline([SimWorker("a", phase=0.2), SimWorker("b", phase=0.7)])
    assert set(round(d, 6) for d in delays.values()) == {0.7}  # at b's report; the x.5 sample would be 1.5
    assert all(s.requests == 2 * RPS for s in timeline)


def test_a_report_appends_nothing_before_the_first_sample_or_after_the_stop():
    env = Environment()
    env.runner = BareMaster(["a"])
    recorder = RunRecorder(env, None)
    recorder.clock = ManualClock(START + 5.2)
    recorder.started_at = float(START)
    env.stats.total.num_reqs_per_sec.update({s: RPS for s in range(START, START + 5)})
    env.events.worker_report.fire(client_id="a", data={ReportWatermarks.REPORT_KEY: START + 2})
    assert recorder.seconds == []  # no load sampled yet: nothing to append with
    recorder._emit_master_seconds(Second(t=START + 5.3, users=RPS, spawning=False, requests=0, failures=0),
                                  env.stats.total, final=False)
    assert [int(s.t) - 1 for s in recorder.seconds] == [START, START + 1, START + 2]
    recorder.ended_at = START + 5.4
    env.events.worker_report.fire(client_id="a", data={ReportWatermarks.REPORT_KEY: START + 4})
    assert len(recorder.seconds) == 3  # the stop's own flush and `late_reports` decide what follows


def test_a_worker_without_watermarks_holds_every_second_the_fixed_lag():
    workers = [SimWorker("new", phase=0.2), SimWorker("old", phase=0.6, interval=3.0, watermark=False)]
    timeline, delays = master_timeline(workers)
    assert all(LAG - 1 < d <= LAG - 0.5 for d in delays.values())  # second S appended 4 s after it, to a tick
    assert all(s.requests == 2 * RPS for s in timeline[1:])  # and complete, as before


def test_a_lost_worker_holds_seconds_to_the_lag_until_it_is_marked_missing():
    workers = [SimWorker("a", phase=0.2), SimWorker("lost", phase=0.6, reports_until=START + 10.6)]
    timeline, delays = master_timeline(workers, missing={"lost": START + 14.6})
    assert [int(s.t) - 1 for s in timeline] == list(range(START, START + len(timeline)))
    assert LAG - 1 < max(delays.values()) <= LAG - 0.5  # held to the lag, never more
    held = [second for second, delay in delays.items() if delay > 1.5]
    assert held and min(held) >= START + 9 and max(held) <= START + 14
    after = [second for second in delays if second > START + 14]
    assert after and all(delays[s] <= 1.5 for s in after)  # the worker left is followed again
    assert all(s.requests == 2 * RPS for s in timeline[1:10]) and all(s.requests == RPS for s in timeline[12:])


def test_a_worker_that_joins_late_holds_the_master_to_the_lag_until_its_first_report():
    """Connected without users yet: its first requests come in its first report, which no second passes."""
    workers = [SimWorker("a", phase=0.2), SimWorker("late", starts=START + 6.0, phase=6.4)]
    timeline, delays = master_timeline(workers)
    early = [s for s, d in delays.items() if d > 1.5]
    assert early and max(early) < START + 6 and LAG - 1 < max(delays.values()) <= LAG - 0.5
    assert all(delays[s] <= 1.5 for s in delays if s >= START + 6)
    assert [s.requests for s in timeline[1:]] == [RPS] * 5 + [2 * RPS] * (len(timeline) - 6)


def test_final_flush_appends_up_to_the_last_second_a_request_completed_in():
    env = Environment()
    env.runner = BareMaster(["a", "b"])
    recorder = RunRecorder(env, None)
    recorder.started_at = float(START)
    recorder.watermarks.merge_delta(START + 3, "a")
    recorder.watermarks.merge_delta(START + 3, "b")
    total = SimpleNamespace(num_reqs_per_sec={s: 2 * RPS for s in range(START, START + 6)}, num_fail_per_sec={})
    recorder._emit_master_seconds(Second(t=START + 5.5, users=20, spawning=False, requests=0, failures=0), total,
                                  final=False)
    assert recorder.seconds[-1].t == START + 4.0  # through both watermarks
    recorder._emit_master_seconds(Second(t=START + 7.5, users=0, spawning=False, requests=0, failures=0), total,
                                  final=True)
    assert [int(s.t) - 1 for s in recorder.seconds] == list(range(START, START + 6))


# -- a real master and two workers ---------------------------------------------------------------------

@pytest.mark.e2e
def test_a_processes_2_run_counts_each_second_by_when_its_requests_completed(endpoint, tmp_path):
    """`--processes 2 --log-requests`: the master's timeline, appended by the workers' watermarks, holds every
    request once: its seconds (each once, in order) add up to the totals, which a second appended before a
    report that added to it would not (its late requests would be in no second); and each request is in the
    second it completed in, as the workers' own logs say, but for Locust logging a request a little after
    its end (a busy event loop)."""
    import gzip
    import json

    from sm_locust.record.timeline import read_seconds
    from tests.conftest import SAMPLE_PAYLOAD, run_cli

    out = tmp_path / "run"
    result = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", endpoint.url, "--payload",
                     str(SAMPLE_PAYLOAD), "-u", "4", "-r", "100", "-t", "10s", "--processes", "2",
                     "--log-requests", "true", "--out", str(out), "-q")
    assert result.returncode in (0, 1), result.stdout + result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["workers"]["connected"] == 2 and summary["workers"]["lost"] == []
    seconds = read_seconds(out / "timeline.jsonl")
    keys = [round(s.t) - 1 for s in seconds]
    assert keys == list(range(keys[0], keys[0] + len(keys)))  # each second once, in order
    assert sum(s.requests for s in seconds) == summary["totals"]["requests"] > 100
    ends: list[float] = []
    for path in sorted(out.glob("requests.w*.jsonl.gz")):
        with gzip.open(path, "rt") as fh:
            ends += [row["t"] + row["e2e_ms"] / 1000 for row in map(json.loads, fh) if row.get("e2e_ms") is not None]
    assert len(ends) == summary["totals"]["requests"]
    slack = 0.25  # a request's end to Locust logging it, on a loaded machine
    counted = 0
    for second, s in zip(keys, seconds, strict=True):  # the requests up to each second's end
        counted += s.requests
        surely = sum(1 for end in ends if end < second + 1 - slack)
        maybe = sum(1 for end in ends if end < second + 1 + slack)
        assert surely <= counted <= maybe, (second, surely, counted, maybe)


def test_a_headless_stop_holds_back_the_seconds_the_workers_last_reports_complete_until_quit():
    """Locust fires test_stop on a master before its workers' last reports arrive: appended then, the last
    seconds would miss their requests for good. A headless stop appends only what the watermarks cover;
    the quit (after every final report) appends the rest, whole, and their keyed sends with them."""
    env = Environment()
    env.runner = BareMaster(["a", "b"])
    recorder = RunRecorder(env, None)
    recorder.started_at = float(START)
    recorder.open_loop.merge_delta([60, 0, 0, 0, [[s, 10, 0, 0] for s in range(START, START + 6)]], "a")
    recorder.watermarks.merge_delta(START + 3, "a")
    recorder.watermarks.merge_delta(START + 4, "b")
    total = SimpleNamespace(num_reqs_per_sec={s: 2 * RPS for s in range(START, START + 6)}, num_fail_per_sec={})
    total.num_reqs_per_sec[START + 5] = RPS  # half of it still to come
    stop = Second(t=START + 6.2, users=20, spawning=False, requests=0, failures=0, target_rate=20.0, sent=0)
    recorder._emit_master_seconds(stop, total, final=True, hold=True)
    assert [int(s.t) - 1 for s in recorder.seconds] == list(range(START, START + 4))
    total.num_reqs_per_sec[START + 5] = 2 * RPS  # the last reports, then the quit
    recorder._emit_master_seconds(Second(t=START + 7.1, users=0, spawning=False, requests=0, failures=0), total,
                                  final=True)
    assert [(int(s.t) - 1, s.requests) for s in recorder.seconds] == [(s, 2 * RPS) for s in range(START, START + 6)]
    assert [s.sent for s in recorder.seconds] == [10] * 6
    unheld = RunRecorder(Environment(), None)  # without hold (the web UI's stop): everything there is, now
    unheld.environment.runner = BareMaster(["a"])
    unheld.started_at = float(START)
    unheld._emit_master_seconds(stop, total, final=True)
    assert [int(s.t) - 1 for s in unheld.seconds] == list(range(START, START + 6))
