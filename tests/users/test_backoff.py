"""Closed-loop back-off after connection errors: a dead endpoint is not a client busy loop (attempts
per second stay bounded, goodput reads 0, the back-offs are counted), while an endpoint that
answers, even with errors, is driven as hard as before."""

from __future__ import annotations

import json

import locust  # noqa: F401  (gevent patching first)
from locust import constant
from locust.env import Environment

import pytest

from sm_locust.invocation import InvocationError
from sm_locust.measure.timeline import Second
from sm_locust.record.recorder import RunRecorder
from sm_locust.record.timeline import read_seconds
from sm_locust.testing import invoke_user, run_load_test
from sm_locust.users.backoff import FIRST_BACKOFF_S, MAX_BACKOFF_S, Backoff, ConnectionBackoff, connection_error_code
from tests.conftest import SAMPLE_PAYLOAD

BODY = SAMPLE_PAYLOAD.read_bytes()


def test_back_off_doubles_to_its_cap_and_resets_after_a_task_that_reached_the_endpoint():
    backoff = Backoff()
    assert [backoff.after(True) for _ in range(7)] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert backoff.after(False) == 0.0
    assert backoff.after(True) == FIRST_BACKOFF_S and MAX_BACKOFF_S == 1.0


@pytest.mark.parametrize("error, code", [
    (InvocationError("EndpointConnectionError", "Could not connect to the endpoint URL"), "EndpointConnectionError"),
    (InvocationError("ConnectTimeoutError", "Connect timeout on endpoint URL"), "ConnectTimeoutError"),
    (InvocationError("ConnectionClosedError", "Connection was closed"), "ConnectionClosedError"),
    (ConnectionRefusedError(111, "refused"), "ConnectionRefusedError"),
    (InvocationError("ModelError", "(original status 500)"), None),
    (InvocationError("ThrottlingException", "Rate exceeded"), None),
    (InvocationError("ReadTimeoutError", "Read timeout on endpoint URL"), None),
    (None, None),
])
def test_only_failures_to_reach_the_endpoint_back_off(error, code):
    assert connection_error_code(error) == code


class NoWait(invoke_user(BODY)):
    """A user with its own wait_time: the back-off still applies."""

    abstract = False
    wait_time = constant(0)


@pytest.mark.e2e
@pytest.mark.parametrize("transport", ["fast", "boto3"])
@pytest.mark.parametrize("user", [invoke_user(BODY), NoWait], ids=["think-time", "own-wait-time"])
def test_a_dead_endpoint_is_not_a_busy_loop(transport, user, refused_url):
    # 2 s: the back-offs (50 ms doubling to 1 s) allow ~6 attempts per user, a busy loop hundreds a second
    users, seconds = 2, 2.0
    result = run_load_test([user], users=users, run_time_s=seconds,
                           options={"endpoint_name": "ep", "endpoint_url": refused_url, "transport": transport})
    totals = result.totals
    attempts_per_user_s = totals["requests"] / users / result.summary["duration_s"]
    # without the back-off: 400 (boto3) to 1,800 (fast) per user here; how many fewer is the back-off's, or the
    # machine's (at load 9 with CPU hogs, the boto3 users had sent nothing yet when the 2 s ended)
    assert attempts_per_user_s < 10, totals
    assert totals["failures"] == totals["requests"] and set(totals["errors"]) <= {"EndpointConnectionError"}
    assert totals["successes"] == 0 and totals["goodput_rps"] == 0.0
    backoff = totals["backoff"]
    # every failed attempt but each user's last is followed by a back-off of 50 ms or more (how many fit in
    # 2 s is the machine's: a busy one starts the users late)
    assert backoff["count"] >= totals["requests"] - users
    assert backoff["seconds"] >= 0.05 * backoff["count"] - 0.001  # (rounded to 3 places)


@pytest.mark.e2e
def test_an_endpoint_answering_errors_is_not_backed_off(endpoint_factory):
    ep = endpoint_factory(model_error_ratio=1.0, seed=1)
    result = run_load_test([invoke_user(BODY)], users=2, run_time_s=2.0,
                           options={"endpoint_name": "ep", "endpoint_url": ep.url})
    totals = result.totals
    # every answer an error, none backed off: each user's requests follow one another with no back-off
    # between them (a quiet machine sends hundreds in the 2 s; a busy one, at load 10, sent none once)
    assert totals["backoff"]["count"] == 0
    assert totals["requests"] == totals["failures"] and set(totals["errors"]) <= {"ModelError"}


@pytest.mark.e2e
def test_back_offs_show_in_the_timeline_and_summary(tmp_path, refused_url):
    result = run_load_test([invoke_user(BODY)], users=1, run_time_s=2.5, out_dir=tmp_path,
                           options={"endpoint_name": "ep", "endpoint_url": refused_url})
    timeline = read_seconds(tmp_path / "timeline.jsonl")
    assert sum(s.backoffs for s in timeline) == result.totals["backoff"]["count"] > 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["totals"]["backoff"]["count"] == result.totals["backoff"]["count"]


def test_workers_report_their_back_offs_to_the_master():
    worker, master = ConnectionBackoff(), ConnectionBackoff()
    worker.count, worker.seconds = 3, 0.35
    data: dict = {}
    worker._on_report_to_master(client_id="w1", data=data)
    master._on_worker_report(client_id="w1", data=data)
    worker._on_report_to_master(client_id="w1", data=(again := {}))  # nothing new: nothing sent
    master._on_worker_report(client_id="w1", data=again)
    assert (master.count, master.seconds) == (3, pytest.approx(0.35)) and again == {}


@pytest.mark.e2e
def test_the_progress_line_shows_goodput_and_back_offs(capsys):
    environment = Environment()
    runner = environment.create_local_runner()
    recorder = RunRecorder(environment, None, progress_every_s=2)
    recorder.started_at = 100.0
    recorder.seconds = [Second(t=101.0, users=2, spawning=False, requests=4, failures=4, backoffs=3),
                        Second(t=102.0, users=2, spawning=False, requests=6, failures=2, backoffs=1)]
    recorder._print_progress()
    line = capsys.readouterr().out
    assert "rps=     5.0" in line and "goodput=     2.0" in line and "backoffs=4 (connection errors)" in line
    runner.quit()
