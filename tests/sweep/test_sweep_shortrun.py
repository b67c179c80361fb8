"""A fixed-length sweep load too short for a useful interval: the steady seconds by the recorder's own
warm-up rule, the batches by `uncertainty.batch_count`, the note (plan and progress) and its suggestion;
no note for a long enough run, a search or a pattern; the sweep still runs."""

from __future__ import annotations

import pytest

from sm_locust.measure.steady import measure_step, steady_samples
from sm_locust.measure.timeline import Second
from sm_locust.measure.uncertainty import batch_count
from sm_locust.sweep.api import load_sweep, run_sweep
from sm_locust.sweep.serverless.measure import Phase, load_figures, phase_samples
from sm_locust.sweep.shortrun import MIN_BATCHES, Window, enough_samples, short_run
from tests.conftest import SAMPLE_PAYLOAD
from tests.sweep_fakes import FakeDeployer, FakeRunner


def seconds(n: int, users: int = 6, t0: float = 1000.0) -> list[Second]:
    return [Second(t=t0 + i + 1, users=users, spawning=False, requests=100, failures=0, hist={20: 100})
            for i in range(n)]


def test_steady_samples_are_what_the_recorder_measures_a_constant_run_on():
    for n in (4, 6, 9, 12, 30):
        assert measure_step(seconds(n)).duration_s == steady_samples(n)
    assert (steady_samples(6), steady_samples(12)) == (5, 10)  # as a local 6 s and 12 s run recorded: 5.05, 10.03 s


def test_phase_samples_are_what_the_serverless_figures_are_cut_from():
    phases = [Phase("stability", 1, 6.0), Phase("concurrency", 2, 6.0, 1.0)]
    timeline = seconds(6, users=1) + seconds(6, users=2, t0=1006.0)
    figures = load_figures(timeline, phases, {"requests": 1200, "failures": 0})
    stability, concurrency = phase_samples(6.0)
    assert (stability, concurrency) == (6, 5)
    assert figures.stability is not None and figures.stability.requests == 100 * stability
    assert figures.concurrency[0].seconds == concurrency


def test_six_seconds_leave_two_batches_and_the_suggestion_is_the_shortest_that_gives_enough():
    note = short_run("load.run_time 6s", 6.0, [Window("per test", "rate", steady_samples)])
    assert note is not None and (note.samples, note.batches, note.suggest_s) == (5, 2, 9)
    assert batch_count(steady_samples(note.suggest_s - 1)) < MIN_BATCHES
    # "or more": every longer run reaches it too (the batch count is not monotone in the samples)
    assert all(batch_count(steady_samples(s)) >= MIN_BATCHES for s in range(note.suggest_s, 601))
    assert note.text() == ("note: load.run_time 6s leaves about 5 steady seconds per test: its 95 % rate intervals "
                           "rest on 2 batches (Student's t 12.7), so close configurations will tie; 9s or more gives "
                           "at least 4 batches (t 3.18 or less)")


def test_no_note_when_every_window_has_enough_and_the_worst_window_is_named():
    window = Window("per test", "rate", steady_samples)
    assert short_run("load.run_time 12s", 12.0, [window]) is None
    assert short_run("load.run_time 9s", 9.0, [window]) is None
    assert short_run("x", 6.0, []) is None
    stability = Window("in the stability test", "warm-mean", lambda s: phase_samples(s)[0])
    concurrency = Window("per concurrency phase", "goodput", lambda s: phase_samples(s)[1])
    note = short_run("load.run_time 8s", 8.0, [stability, concurrency])
    assert note is not None and (note.where, note.samples, note.batches) == ("per concurrency phase", 6, 3)
    assert note.suggest_s == 10 and phase_samples(10)[1] >= enough_samples() > phase_samples(9)[1]
    assert short_run("load.run_time 8s", 8.0, [stability]) is None  # 8 seconds, all kept: 4 batches


def test_too_few_seconds_for_any_interval_says_so():
    note = short_run("load.run_time 3s", 3.0, [Window("per test", "rate", steady_samples)])
    assert note is not None and note.batches == 0 and note.suggest_s == 9
    assert "too few for a 95 % interval (batch means need 4 seconds)" in note.text()


def realtime(**load) -> dict:
    return {"name": "short", "grid": {"max_concurrency": [1, 2]}, "price_per_hour": 0.2, "report": False,
            "objective": {"optimize": "throughput"}, "load": {"payload": str(SAMPLE_PAYLOAD), **load}}


@pytest.mark.parametrize(("load", "noted"), [
    ({"users": 6, "run_time": "6s"}, True),
    ({"users": 6, "run_time": "6s", "repeat": 3}, True),  # each run keeps its own interval: no more batches
    ({"target_rps": 50, "run_time": "6s"}, True),  # the open shape: one constant rate
    ({"users": 6, "run_time": "12s"}, False),
    ({"users": 6}, False),  # the default run time
    ({"shape": "plateau", "run_time": "6s"}, False),  # a search cuts its own steps
    ({"shape": "step", "step_users": 2, "step_seconds": 3, "run_time": "6s"}, False),
])
def test_only_a_short_fixed_length_load_is_noted(load, noted):
    note = load_sweep(realtime(**load), out="unused").plan.short_run()
    assert (note is not None) is noted
    if noted:
        assert note.text().startswith("note: load.run_time 6s leaves about 5 steady seconds per test")


def serverless(run_time: str, tests: list[str]) -> dict:
    return {"name": "sls", "deploy": "local", "endpoint": {"service_time_ms": 60},
            "serverless": {"memory_size_mb": [2048], "max_concurrency": 2, "cold_start_ms": 300,
                           "idle_timeout_s": 1},
            "tests": tests, "cold_start": {"rounds": 1}, "report": False,
            "load": {"payload": str(SAMPLE_PAYLOAD), "run_time": run_time}}


def test_a_serverless_sweep_is_noted_by_its_own_windows():
    note = load_sweep(serverless("6s", ["stability", "concurrency", "cold_start"]), out="unused").plan.short_run()
    assert note is not None and note.text().startswith(
        "note: load.run_time 6s leaves about 5 steady seconds per concurrency phase: its 95 % goodput intervals "
        "rest on 2 batches")
    assert "; 10s or more gives at least 4 batches" in note.text()
    assert load_sweep(serverless("6s", ["cold_start"]), out="unused").plan.short_run() is None  # timed one by one
    assert load_sweep(serverless("10s", ["stability", "concurrency"]), out="unused").plan.short_run() is None


def test_the_sweep_says_it_once_at_its_start_and_still_runs(tmp_path):
    results = {}
    for run_time in ("6s", "12s"):
        sweep = load_sweep(realtime(users=6, run_time=run_time), out=tmp_path / run_time)
        sweep.deployer = FakeDeployer(deploy_s=0.01)
        sweep.runner_class = type("Runner", (FakeRunner,), {"tested": []})
        lines: list[str] = []
        results[run_time] = run_sweep(sweep, yes=True, printer=lines.append, handle_signals=False)
        notes = [i for i, line in enumerate(lines) if "note: load.run_time" in line]
        assert len(notes) == (1 if run_time == "6s" else 0)
        if notes:
            assert notes[0] == 1 and "5 steady seconds per test" in lines[1]  # right after the opening line
        assert sweep.runner_class.tested == [1, 2]
    assert results["6s"].exit_code == results["12s"].exit_code == 0
