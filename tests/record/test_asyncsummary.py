"""summary.json `async` from synthetic calls: counts, names, percentiles with intervals, backlog."""

from __future__ import annotations

import json

import pytest

from sm_locust.core.answers import answer_lines
from sm_locust.plateau.asyncresults import RESULT, AsyncCall
from sm_locust.record.asyncsummary import AsyncSummary
from sm_locust.record.schema import summary_problem

START = 1_000_000.0


def _calls():
    calls = []
    for i in range(120):  # two a second for 60 s; the time to result 400 + 10 * (i % 9) ms
        sent = START + i / 2
        if i % 20 == 7:
            calls.append(AsyncCall(sent, sent + 0.02, sent + 0.3, "AsyncFailure: ModelError: bad row", 3, 100))
        else:
            calls.append(AsyncCall(sent, sent + 0.02, sent + 0.4 + 0.01 * (i % 9), RESULT, 4, 200))
    calls.append(AsyncCall(START + 59.5, START + 59.52))  # still awaited at the stop
    calls.append(AsyncCall(START + 1, START + 1.02, START + 1 + 900, "AsyncTimeout: no result within 900 s", 50, 5000))
    calls.append(AsyncCall(START + 60.1, START + 60.2))  # sent while the stop reached the users
    return calls


def test_figures_from_calls():
    summary = AsyncSummary.from_calls(_calls(), START, START + 60.0)
    assert summary.accepted == 123
    assert summary.results == 114
    assert dict(summary.failed) == {"AsyncFailure: ModelError: bad row": 6}  # the timeout came after the stop
    assert summary.awaited_at_stop == 3  # never answered, timed out later, sent during the stop
    assert summary.accepted == summary.results + summary.failures + summary.awaited_at_stop
    ttr = dict(summary.time_to_result)
    assert ttr["p50_ms"] == 440 and ttr["p95_ms"] <= ttr["p99_ms"] == 480
    ci = dict(summary.time_to_result_ci95)
    assert ci["p50_ms"].known and ci["p50_ms"].contains(440)
    assert dict(summary.acceptance)["p50_ms"] == 20
    assert summary.polls == 114 * 4 + 6 * 3 + 50
    assert summary.poll_resolution_max_ms == 200
    assert summary.backlog_max >= 1


def test_json_round_trip_and_schema():
    summary = AsyncSummary.from_calls(_calls(), START, START + 60.0)
    data = json.loads(json.dumps(summary.to_json()))
    assert AsyncSummary.from_json(data) == summary
    assert data["time_to_result"]["ci95"]["p50_ms"][0] <= 440 <= data["time_to_result"]["ci95"]["p50_ms"][1]
    assert data["failures"] == 6
    base = {"schema": 1, "totals": {}, "steps": []}
    assert summary_problem({**base, "async": data}) is None
    assert summary_problem({**base, "async": {**data, "results": "many"}}) is not None


def test_failure_names_bounded():
    calls = [AsyncCall(START, START + 0.01, START + 1, f"AsyncFailure: kind {i}") for i in range(30)]
    summary = AsyncSummary.from_calls(calls, START, START + 5)
    assert len(summary.failed) == 21 and dict(summary.failed)["other"] == 10
    assert summary.failures == 30 and summary.results == 0
    assert not dict(summary.time_to_result_ci95)["p50_ms"].known  # no result: no interval, none invented


def test_closing_line():
    data = AsyncSummary.from_calls(_calls(), START, START + 60.0).to_json()
    [line] = answer_lines({"async": data})
    assert line.startswith("async: accepted 123, results 114, failed 6 (AsyncFailure: ModelError: bad row x6); ")
    assert "time to result p50 440 ms (95 % " in line and "awaited at the stop 3" in line
    assert answer_lines({}) == []


def test_the_backlog_series_per_second_and_thinned_for_long_runs():
    from sm_locust.record.asyncsummary import thin

    calls = [AsyncCall(START + i, START + i + 0.1, START + i + 0.1 + 3.0, RESULT) for i in range(10)]
    summary = AsyncSummary.from_calls(calls, START, START + 20)
    assert len(summary.backlog) == 20 and summary.backlog_every_s == 1
    assert max(summary.backlog) == summary.backlog_max == 3  # three calls in flight at each second's end
    assert summary.backlog[-1] == 0
    assert AsyncSummary.from_json(json.loads(json.dumps(summary.to_json()))).backlog == summary.backlog
    values, every = thin(list(range(7200)) + [5], points=3600)
    assert every == 3 and len(values) == 2401 and values[0] == 2 and values[-1] == 5
    assert thin([4, 1, 2])[0] == (4, 1, 2)


def test_the_ledger_counts_the_live_backlog_and_ships_it():
    from sm_locust.transport.asyncwait import AsyncLedger

    worker, master = AsyncLedger(), AsyncLedger()
    for _ in range(3):
        worker.open()
    worker.add(AsyncCall(START, START + 0.1, START + 1, RESULT))
    assert worker.backlog == 2
    master.merge_delta(worker.take_delta(), "w1")
    assert master.backlog == 2 and len(master.calls) == 1
    worker.add(AsyncCall(START, START + 0.1, START + 2, RESULT))
    master.merge_delta(worker.take_delta(), "w1")
    assert master.backlog == worker.backlog == 1
    assert worker.take_delta() is None


def test_the_ledger_counts_the_awaited_calls_by_second_of_acceptance_and_ships_them():
    from sm_locust.transport.asyncwait import AsyncLedger

    worker, master = AsyncLedger(), AsyncLedger()
    for accepted in (START + 0.1, START + 0.7, START + 1.2):
        worker.open(accepted)
    worker.add(AsyncCall(START, START + 0.7, START + 2, RESULT))
    assert worker.awaited_by_second() == {int(START): 1, int(START) + 1: 1}
    master.merge_delta(worker.take_delta(), "w1")
    master.merge_delta({"calls": [], "opened": 1, "pending": [[int(START) + 5, 1]]}, "w2")
    assert master.awaited_by_second() == {int(START): 1, int(START) + 1: 1, int(START) + 5: 1}
    worker.add(AsyncCall(START, START + 0.1, START + 3, RESULT))
    worker.add(AsyncCall(START, START + 1.2, START + 3, RESULT))
    master.merge_delta(worker.take_delta(), "w1")  # a snapshot replaces the worker's last one
    assert master.awaited_by_second() == {int(START) + 5: 1} and worker.awaited_by_second() == {}
    master.reset()
    assert master.awaited_by_second() == {}


def test_the_closing_line_names_the_notifications_delivery_when_nothing_was_polled():
    calls = [AsyncCall(START + i, START + i + 0.02, START + i + 0.5, RESULT, 0, 40.0 + i) for i in range(8)]
    line = AsyncSummary.from_calls(calls, START, START + 10).closing_line()
    assert "(notification delivery <= 47 ms)" in line and "polls 0" in line
    polled = [AsyncCall(START, START + 0.02, START + 0.5, RESULT, 3, 100.0)]
    assert "(poll resolution <= 100 ms)" in AsyncSummary.from_calls(polled, START, START + 10).closing_line()


def test_the_first_calls_time_to_result_is_kept_apart():
    calls = [AsyncCall(START + 1, START + 1.1, START + 2, RESULT), AsyncCall(START, START + 0.1, START + 5, RESULT)]
    summary = AsyncSummary.from_calls(calls, START, START + 10)
    assert summary.first_time_to_result_ms == pytest.approx(5000)  # sent first, answered last
    assert AsyncSummary.from_json(json.loads(json.dumps(summary.to_json()))).first_time_to_result_ms == \
        pytest.approx(5000)
    waiting = [AsyncCall(START, START + 0.1), AsyncCall(START + 1, START + 1.1, START + 2, RESULT)]
    assert AsyncSummary.from_calls(waiting, START, START + 10).first_time_to_result_ms is None


def test_the_async_backlog_rides_on_a_timeline_line_only_when_measured():
    import orjson

    from sm_locust.measure.timeline import Second
    from sm_locust.record.timeline import decode_record, encode_line

    waited = Second(t=START, users=2, spawning=False, requests=3, failures=0, async_backlog=7)
    line = orjson.loads(encode_line(waited))
    assert line["async_backlog"] == 7 and decode_record(line).async_backlog == 7
    plain = orjson.loads(encode_line(Second(t=START, users=2, spawning=False, requests=3, failures=0)))
    assert "async_backlog" not in plain and decode_record(plain).async_backlog is None


def test_a_run_that_asked_for_async_results_writes_the_section_with_no_call():
    """Every worker lost before a call: `async` in zeros, not absent (the run asked for results)."""
    import locust  # noqa: F401  (gevent patching first)
    from locust.env import Environment

    from sm_locust.record.recorder import RunRecorder
    from sm_locust.transport.asyncwait import AsyncLedger

    asked, plain = Environment(), Environment()
    for environment in (asked, plain):
        environment.create_local_runner()
    AsyncLedger.for_environment(asked).wanted = True
    figures = RunRecorder(asked, None).summary()["async"]
    assert (figures["accepted"], figures["results"], figures["awaited_at_stop"]) == (0, 0, 0)
    assert "async" not in RunRecorder(plain, None).summary()
