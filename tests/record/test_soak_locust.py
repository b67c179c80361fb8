"""The recorder inside Locust over a (shortened) soak: summary.json is there from the first second and
rewritten at each checkpoint (`complete: false`), each "hour" closes with its errors by code and one
progress line, the final write says `complete: true`, and timeline.jsonl holds every second sampled.
An hour is 2 s and a checkpoint 1 s here."""

from __future__ import annotations

import json

import gevent
import locust  # noqa: F401  (gevent patching first)
from locust.env import Environment

import pytest

from sm_locust.invocation import INVOKE_ENDPOINT, InvocationError
from sm_locust.record.accumulate import RunTimeline
from sm_locust.record.recorder import CHECKPOINT_ENV, RunRecorder
from sm_locust.record.schema import check_summary
from sm_locust.record.timeline import TIMELINE_JSONL, read_seconds

pytestmark = pytest.mark.e2e  # every test here starts a server, a process or Locust


def test_the_recorder_checkpoints_closes_hours_and_finishes(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(CHECKPOINT_ENV, "1")
    environment = Environment()
    runner = environment.create_local_runner()
    recorder = RunRecorder(environment, tmp_path, endpoint="ep")
    recorder.timeline = RunTimeline(hour_s=2.0)
    summary_path = tmp_path / "summary.json"
    try:
        recorder.on_test_start(environment)
        assert json.loads(summary_path.read_text())["complete"] is False  # readable from the first second
        failures = 0
        for second in range(7):
            for i in range(10):
                error = InvocationError("ModelError", "injected") if i == 0 and second % 2 else None
                failures += error is not None
                environment.events.request.fire(request_type=INVOKE_ENDPOINT, name="ep", response_time=12.0 + i,
                                                response_length=5, exception=error, context={})
            gevent.sleep(1.0)
        checkpoint = json.loads(summary_path.read_text())
        assert checkpoint["complete"] is False and checkpoint["totals"]["requests"] >= 50
        recorder.on_test_stop(environment)
    finally:
        runner.quit()
    final = check_summary(json.loads(summary_path.read_text()), summary_path)
    assert final["complete"] is True and final["totals"]["requests"] == 70 and final["totals"]["failures"] == failures
    hours = final["hours"]
    assert len(hours) >= 3 and [h["hour"] for h in hours] == list(range(1, len(hours) + 1))
    assert sum(h["requests"] for h in hours) == 70
    assert sum(h["errors"].get("ModelError", 0) for h in hours) == failures  # each failure in exactly one hour
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("sm-locust: hour ")]
    assert len(printed) == len(hours) - 1 and printed[0].startswith("sm-locust: hour 1 (")  # the last is partial
    assert len(read_seconds(tmp_path / TIMELINE_JSONL)) == recorder.timeline.count
