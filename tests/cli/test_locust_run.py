"""Locust runs in-process against the local endpoint: events, failure names, and no hidden retries."""

from __future__ import annotations

import json

import gevent
import locust  # noqa: F401
from locust import task
from locust.env import Environment
from locust.exception import StopUser

import pytest

from sm_locust import SageMakerUser
from sm_locust.invocation import INVOKE_ENDPOINT, Invocation
from sm_locust.record.recorder import RunRecorder
from tests.conftest import SAMPLE_PAYLOAD

BODY = SAMPLE_PAYLOAD.read_bytes()
CALLS_PER_USER = 50


def user_class(url: str, calls: int | None = None, **attrs):
    class Invoker(SageMakerUser):
        endpoint_name = "my-endpoint"
        endpoint_url = url

        def on_start(self):
            self.calls = 0

        @task
        def invoke(self):
            if calls is not None and self.calls >= calls:
                raise StopUser()
            self.calls += 1
            self.client.invoke(Invocation(body=BODY, **attrs))

    return Invoker


def run_until_done(env: Environment, users: int, timeout: float = 30.0) -> None:
    runner = env.create_local_runner()
    runner.start(users, spawn_rate=users)
    with gevent.Timeout(timeout):
        while runner.user_count or not env.stats.total.num_requests:
            gevent.sleep(0.1)
    runner.quit()


@pytest.fixture
def endpoint(module_endpoint):
    """The module's default endpoint: the tests only send to it (its counts read as differences)."""
    return module_endpoint


@pytest.mark.e2e
def test_every_call_is_one_request_event_with_endpoint_name(endpoint):
    env = Environment(user_classes=[user_class(endpoint.url, CALLS_PER_USER)])
    run_until_done(env, users=3)
    entry = env.stats.entries[("my-endpoint", INVOKE_ENDPOINT)]
    assert entry.num_requests == 3 * CALLS_PER_USER
    assert entry.num_failures == 0
    assert entry.avg_content_length > 100  # the response body was read and measured


@pytest.mark.e2e
def test_target_variant_names_the_entry(endpoint):
    env = Environment(user_classes=[user_class(endpoint.url, 5, target_variant="blue")])
    run_until_done(env, users=1)
    assert env.stats.entries[("my-endpoint/blue", INVOKE_ENDPOINT)].num_requests == 5


@pytest.mark.e2e
def test_server_counts_exactly_what_the_client_counts_with_throttles_and_5xx(endpoint_factory):
    ep = endpoint_factory(throttle_ratio=0.2, error_ratio=0.2, model_error_ratio=0.1, seed=1)
    env = Environment(user_classes=[user_class(ep.url, CALLS_PER_USER)])
    run_until_done(env, users=4)
    server = ep.stats()
    total = env.stats.total
    assert total.num_requests == 4 * CALLS_PER_USER
    assert server["requests"] == total.num_requests  # nothing was retried
    codes = {}
    for err in env.stats.errors.values():
        code = str(err.error).split(":", 1)[0]
        codes[code] = codes.get(code, 0) + err.occurrences
    assert set(codes) == {"ThrottlingException", "InternalFailure", "ServiceUnavailable", "ModelError"}
    assert codes["ThrottlingException"] == server["ThrottlingException"]
    assert codes["ModelError"] == server["ModelError"]
    assert codes["InternalFailure"] + codes["ServiceUnavailable"] == server["errors_5xx"]
    assert total.num_failures == sum(codes.values())


@pytest.mark.e2e
def test_connection_refused_is_counted_not_raised(refused_url):
    url = refused_url
    env = Environment(user_classes=[user_class(url, 3)])
    run_until_done(env, users=1)
    assert env.stats.total.num_failures == 3
    (error,) = env.stats.errors.values()
    assert str(error.error).startswith("EndpointConnectionError")


@pytest.mark.e2e
def test_recorder_writes_summary_with_steps(endpoint, tmp_path):
    env = Environment(user_classes=[user_class(endpoint.url)])
    recorder = RunRecorder(env, tmp_path, endpoint="my-endpoint")
    runner = env.create_local_runner()
    runner.start(2, spawn_rate=100)
    gevent.sleep(2.5)
    runner.start(4, spawn_rate=100)
    gevent.sleep(2.5)
    runner.quit()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["schema"] == 1 and summary["endpoint"] == "my-endpoint"
    assert summary["totals"]["requests"] == env.stats.total.num_requests
    assert summary["totals"]["failures"] == 0 and summary["totals"]["errors"] == {}
    assert [s["users"] for s in summary["steps"]] == [2, 4]
    assert all(s["requests"] > 0 and s["p50_ms"] <= s["p95_ms"] <= s["p99_ms"] for s in summary["steps"])
    assert sum(s["requests"] for s in summary["steps"]) <= summary["totals"]["requests"]
    assert summary["started_at"].endswith("Z") and summary["plateau"] is None
    assert summary["complete"] is True and len(summary["hours"]) == 1
    lines = (tmp_path / "timeline.jsonl").read_bytes().splitlines()
    assert len(lines) == recorder.timeline.count == len(recorder.seconds)
