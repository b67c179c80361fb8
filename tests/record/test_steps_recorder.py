"""summary.json steps from the recorder's timeline: one implementation (measure_step), open-loop keys,
and the master's seconds counted by completion second rather than by report arrival."""

from __future__ import annotations

from types import SimpleNamespace

import locust  # noqa: F401
from locust.env import Environment

from sm_locust.measure.steady import measure_step
from sm_locust.measure.timeline import Second
from sm_locust.record.recorder import MASTER_LAG_S, RunRecorder
from sm_locust.record.summary import step_record, step_records


def seconds(n, users=4, rps=100, target=None, sent=None, t0=1000.0):
    return [Second(t=t0 + i + 1, users=users, spawning=False, requests=rps, failures=0, hist={20: rps - 5, 90: 5},
                   target_rate=target, sent=sent, late=0 if sent is not None else None,
                   dropped=0 if sent is not None else None) for i in range(n)]


def test_summary_steps_are_the_search_measurements():
    timeline = seconds(10, users=2) + seconds(10, users=4, t0=1010.0)
    records = step_records(timeline)
    assert [r["users"] for r in records] == [2, 4]
    for record, part in zip(records, (timeline[:10], timeline[10:]), strict=True):
        step = measure_step(part)
        assert record["rps"] == round(step.rps, 3) and record["p95_ms"] == step.p95_ms
        assert record["requests"] == step.requests < record["total_requests"]  # warm-up excluded
        assert record["stable"] is True and "client_cpu_pct" in record


def test_open_loop_steps_are_cut_by_target_rate_with_send_figures():
    timeline = seconds(10, users=50, rps=50, target=50.0, sent=50) + seconds(10, users=80, rps=80, target=80.0,
                                                                                 sent=80, t0=1010.0)
    records = step_records(timeline)
    assert [r["target_rate"] for r in records] == [50.0, 80.0]
    assert records[1]["sent_rps"] == 80.0 and records[1]["late_fraction"] == 0.0
    assert records[1]["client_bound"] is False


def test_no_sends_in_the_window_is_not_client_bound():
    step = measure_step(seconds(10, users=50, rps=50, target=50.0, sent=0), mode="rate")
    assert step.sent_rps is None and not step.client_bound


def test_master_seconds_count_requests_by_completion_second():
    env = Environment()
    recorder = RunRecorder(env, None)
    recorder.started_at = 100.0
    total = SimpleNamespace(num_reqs_per_sec={100: 10, 101: 10, 102: 10, 103: 10, 104: 10, 105: 10},
                            num_fail_per_sec={101: 1})
    for now in range(100, 107):  # reports arrive in lumps; the state is sampled every second
        recorder._emit_master_seconds(Second(t=now + 0.5, users=4, spawning=False, requests=0, failures=0,
                                             hist={20: 30} if now % 3 == 0 else {}), total, final=False)
    emitted = recorder.seconds
    assert [s.t for s in emitted] == [float(s + 1) for s in range(100, 106 - MASTER_LAG_S + 1)]
    assert [s.requests for s in emitted] == [10] * len(emitted) and emitted[1].failures == 1
    recorder._emit_master_seconds(Second(t=107.5, users=0, spawning=False, requests=0, failures=0), total, final=True)
    assert recorder.seconds[-1].t == 106.0  # stops at the last second a request completed in
    lumps = 30 * sum(1 for now in range(100, 107) if now % 3 == 0)
    assert sum(sum(s.hist.values()) for s in recorder.seconds) == lumps  # every histogram lump kept once
    assert step_record(measure_step(recorder.seconds))["users"] == 4


def test_a_master_stopped_before_its_workers_last_reports_still_records_their_steps(tmp_path):
    """Quitting (--run-time) fires test_stop before the workers' last reports arrive: on a busy machine
    they can hold the whole run. Those seconds are appended at quit, so summary.json's steps hold what
    its totals count."""
    import json
    import time

    from locust.stats import StatsEntry

    from tests.fakes import SocketlessMaster

    env = Environment()
    env.runner = SocketlessMaster(env)
    recorder = RunRecorder(env, tmp_path)
    recorder.on_test_start(env)
    recorder.started_at -= 3  # a 3-s run (--run-time 3s), as the compose test runs
    start = int(recorder.started_at)
    recorder.on_test_stop(env)  # nothing reported yet: no second to record
    assert recorder.timeline.steps() == [] and (tmp_path / "timeline.jsonl").read_bytes() == b""
    report = StatsEntry(env.stats, "ep", "InvokeEndpoint")  # the workers' last reports, merged on quit
    for _second in range(4):
        for _ in range(50):
            report.log(10, 100)
    report.num_reqs_per_sec = {s: 50 for s in range(start, start + 4)}
    env.stats.get("ep", "InvokeEndpoint").extend(report)
    env.stats.total.extend(report)
    recorder.ended_at = time.time()
    env.runner.state = "stopped"
    recorder.on_quit()
    summary = json.loads((tmp_path / "summary.json").read_text())
    lines = (tmp_path / "timeline.jsonl").read_text().splitlines()
    assert summary["totals"]["requests"] == 200
    assert sum(json.loads(line)["requests"] for line in lines) == 200  # every reported second, once
    assert [step["users"] for step in summary["steps"]] == [4]
    recorder.on_quit()  # nothing new arrived: nothing appended twice
    assert (tmp_path / "timeline.jsonl").read_text().splitlines() == lines


def test_a_masters_first_partial_second_takes_the_load_of_the_first_sample_after_it():
    """The second the run started in has no sample of its own: it is ramp-up (the first sample says
    spawning), not the load running when its requests were counted, and so no step of its own."""
    env = Environment()
    recorder = RunRecorder(env, None)
    recorder.started_at = 99.6  # the first sample lands at 100.6, in second 100
    total = SimpleNamespace(num_reqs_per_sec={99: 0, 100: 10, 101: 40, 102: 40, 103: 40, 104: 40},
                            num_fail_per_sec={})
    recorder._emit_master_seconds(Second(t=100.6, users=0, spawning=True, requests=0, failures=0), total,
                                  final=False)
    for now in range(101, 105):
        recorder._emit_master_seconds(Second(t=now + 0.6, users=4, spawning=False, requests=0, failures=0),
                                      total, final=now == 104)
    assert [(s.t, s.users, s.spawning) for s in recorder.seconds][:2] == [(100.0, 0, True), (101.0, 0, True)]
    assert [r["users"] for r in recorder.timeline.steps()] == [4]
