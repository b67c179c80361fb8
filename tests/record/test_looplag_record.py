"""Loop lag on every process: cgroup throttling read from synthetic files, workers' counts shipped to
the master and shown per worker, and the recorder's seconds carrying them."""

from __future__ import annotations

from types import SimpleNamespace

import gevent
import locust  # noqa: F401
from locust.env import Environment

from sm_locust.measure.looplag import LagCounts
from sm_locust.measure.timeline import Second
from sm_locust.record.accumulate import RunTimeline
from sm_locust.record.looplag import (
    CgroupThrottling,
    CpuStat,
    LoopLagMonitor,
    cpu_stat_paths,
    parse_cpu_stat,
)
from sm_locust.record.recorder import RunRecorder
from sm_locust.record.summary import build_summary
from tests.fakes import BareMaster, BareWorker

V2 = "usage_usec 812\nuser_usec 500\nsystem_usec 312\nnr_periods 40\nnr_throttled 6\nthrottled_usec 120000\n"
V1 = "nr_periods 40\nnr_throttled 6\nthrottled_time 120000000\nnr_bursts 0\nburst_time 0\n"
V2_ROOT = "usage_usec 812\nuser_usec 500\nsystem_usec 312\n"


def test_cpu_stat_v1_and_v2_give_the_same_counters():
    assert parse_cpu_stat(V2) == parse_cpu_stat(V1) == CpuStat(periods=40, throttled=6, throttled_us=120000.0)
    assert parse_cpu_stat(V2_ROOT) is None  # no limit controller: nothing to read
    assert parse_cpu_stat("") is None and parse_cpu_stat("nr_periods x\nnr_throttled 1\n") is None


def test_cpu_stat_paths_from_proc_self_cgroup(tmp_path):
    v2 = cpu_stat_paths("0::/kubepods/pod1/c1\n", root=tmp_path)
    assert v2[0] == tmp_path / "kubepods/pod1/c1/cpu.stat" and tmp_path / "cpu.stat" in v2
    v1 = cpu_stat_paths("4:memory:/x\n2:cpu,cpuacct:/docker/abc\n1:name=systemd:/\n", root=tmp_path)
    assert v1[0] == tmp_path / "cpu,cpuacct/docker/abc/cpu.stat"
    assert tmp_path / "memory" / "x" / "cpu.stat" not in v1  # only the cpu controller's
    assert len(v1) == len(set(v1))


def test_throttling_is_read_as_deltas(tmp_path):
    stat = tmp_path / "cpu.stat"
    stat.write_text(V2)
    throttling = CgroupThrottling([tmp_path / "missing" / "cpu.stat", stat])
    assert throttling.available
    stat.write_text(V2.replace("nr_periods 40", "nr_periods 140").replace("nr_throttled 6", "nr_throttled 26")
                    .replace("throttled_usec 120000", "throttled_usec 620000"))
    assert throttling.take() == CpuStat(periods=100, throttled=20, throttled_us=500000.0)
    assert throttling.take() == CpuStat(0, 0, 0.0)  # nothing new since
    nowhere = CgroupThrottling([tmp_path / "none" / "cpu.stat"])
    assert not nowhere.available and nowhere.take() is None


def environment(runner_cls=None):
    env = Environment()
    if runner_cls is not None:
        env.runner = runner_cls()
    return env


def feed(monitor, lags_us):
    for lag in lags_us:
        monitor._fresh.add_sample(5000.0 + lag, lag)


def test_worker_ships_deltas_and_master_merges_them_per_worker(tmp_path):
    stat = tmp_path / "cpu.stat"
    stat.write_text(V1)
    worker = LoopLagMonitor(throttling=CgroupThrottling([stat]))
    worker.attach(environment(BareWorker))
    master = LoopLagMonitor(throttling=CgroupThrottling([tmp_path / "none"]))
    master.attach(environment(BareMaster))
    feed(worker, [100.0] * 9)
    stat.write_text(V1.replace("nr_periods 40", "nr_periods 60").replace("nr_throttled 6", "nr_throttled 8"))
    report: dict = {}
    worker._on_report_to_master(client_id="w1", data=report)
    assert worker.take_delta() is None  # shipped once: nothing new
    master._on_worker_report(client_id="w1", data=report)
    feed(worker, [20_000.0])
    second: dict = {}
    worker._on_report_to_master(client_id="w1", data=second)
    master._on_worker_report(client_id="w1", data=second)
    master._on_worker_report(client_id="w2", data={"sm_locust_loop_lag": LagCounts().to_json()})
    master._on_worker_report(client_id="w3", data={"sm_locust_loop_lag": {"hist_us": {"x": 1}}})  # ignored
    feed(master, [100.0] * 3)  # the master's own loop: shown, never mixed into the workers'
    taken = master.take_second()
    assert taken is not None and taken.samples == 10 and (taken.periods, taken.throttled) == (20, 2)
    assert master.take_second() is None
    figures = master.figures()
    assert figures["totals"]["samples"] == 10 and figures["totals"]["max_ms"] == 20.0
    processes = figures["processes"]
    assert list(processes) == ["master", "w1", "w2"]
    assert processes["master"]["samples"] == 3 and "share" not in processes["master"]
    assert processes["w1"]["share"] == 1.0 and processes["w2"]["share"] == 0.0
    assert processes["w1"]["throttled_periods"] == 0.1
    summary = build_summary(endpoint="e", started_at=0.0, ended_at=10.0, totals={}, errors={}, seconds=(),
                            loop_lag=figures)
    assert summary["totals"]["loop_lag"]["samples"] == 10 and list(summary["loop_lag"]["processes"]) == list(processes)


def test_local_runner_takes_its_own_counts_each_second():
    monitor = LoopLagMonitor(throttling=CgroupThrottling([]))
    monitor.attach(environment())
    feed(monitor, [100.0] * 4)
    assert monitor.take_delta() is None  # a local runner ships nothing
    assert monitor.take_second().samples == 4 and monitor.take_second() is None
    feed(monitor, [300.0])
    assert monitor.figures() == {"totals": monitor.figures()["totals"], "processes": None}
    assert monitor.figures()["totals"]["samples"] == 5  # the whole test, whatever the seconds took


def test_the_sampler_runs_from_test_start_to_test_stop():
    env = environment()
    monitor = LoopLagMonitor.for_environment(env)
    assert LoopLagMonitor.for_environment(env) is monitor
    monitor._throttling = CgroupThrottling([])
    env.events.test_start.fire(environment=env)
    gevent.sleep(0.1)
    env.events.test_stop.fire(environment=env)
    taken = monitor.take_second()
    assert taken is not None and taken.samples >= 1
    gevent.sleep(0.05)
    assert monitor.take_second() is None  # stopped: no more samples


def lagged(t, users=4):
    counts = LagCounts()
    counts.add_sample(5000.0, 1000.0)
    return Second(t=t, users=users, spawning=False, requests=10, failures=0, hist={20: 10}, loop_lag=counts)


def test_merged_blocks_keep_every_sample():
    timeline = RunTimeline(exact_s=3, max_blocks=2)
    timeline.extend(lagged(1000.0 + i) for i in range(12))
    older = timeline._step.older()
    assert sum(s.loop_lag.samples for s in older) + 3 == 12
    assert timeline.steps()[0]["loop_lag"]["samples"] >= 1


def test_master_seconds_carry_the_workers_lag_once():
    recorder = RunRecorder(Environment(), None)
    recorder.started_at = 100.0
    total = SimpleNamespace(num_reqs_per_sec={s: 10 for s in range(100, 110)}, num_fail_per_sec={})
    for now in range(100, 110):
        recorder._emit_master_seconds(lagged(now + 0.5), total, final=False)
    assert sum(s.loop_lag.samples for s in recorder.seconds if s.loop_lag) == 10  # every report's lag kept once
