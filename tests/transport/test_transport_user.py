"""SageMakerUser (and its alias FastSageMakerUser) in an in-process Locust run against the fake
runtime: entries and errors.

Credentials come from the environment through botocore's provider chain, as in a real run.
"""

from __future__ import annotations

import gevent
import locust  # noqa: F401  (gevent monkey-patching before botocore)
from locust import constant, task
from locust.env import Environment
from locust.exception import StopTest

import pytest

from sm_locust.invocation import Invocation
from sm_locust.transport import eventstream as es
from sm_locust.transport.tokens import whitespace_words
from sm_locust.users import FastSageMakerUser, SageMakerUser
from tests.fakes import ACCESS_KEY, REGION, SECRET_KEY, TOKEN, FakeRuntime, echo, json_error


def endpoint(environ, body):
    if environ.get("HTTP_X_AMZN_SAGEMAKER_TARGET_VARIANT") == "throttled":
        return json_error(429, "ThrottlingException", "Rate exceeded")
    if environ["RAW_URI"].endswith("/invocations-response-stream"):
        def frames():
            for word in (b"one ", b"two ", b"three"):
                gevent.sleep(0.005)
                yield es.encode_payload_part(word)

        return 200, [("Content-Type", es.CONTENT_TYPE)], frames()
    return echo(environ, body)


@pytest.fixture
def aws_env(monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.mark.e2e
def test_locust_run_reports_entries_and_throttles(aws_env):
    with FakeRuntime() as server:
        server.routes["ok"] = endpoint

        class Ranker(FastSageMakerUser):
            endpoint_name = "ok"
            region = REGION
            endpoint_url = server.url
            pool_size = 2
            token_counter = whitespace_words
            wait_time = constant(0.01)

            @task(4)
            def rank(self):
                self.client.invoke(Invocation(body=b'{"x": 1}'))

            @task(1)
            def throttled(self):
                self.client.invoke(Invocation(body=b"{}", target_variant="throttled"))

            @task(1)
            def stream(self):
                self.client.invoke_stream(Invocation(body=b"{}"))

        env = Environment(user_classes=[Ranker])
        runner = env.create_local_runner()
        runner.start(4, spawn_rate=4)
        gevent.sleep(3)
        runner.quit()
        gevent.sleep(0.1)
        stats = env.stats

        ok = stats.entries[("ok", "InvokeEndpoint")]
        throttled = stats.entries[("ok/throttled", "InvokeEndpoint")]
        streamed = stats.entries[("ok", "InvokeEndpointWithResponseStream")]
        ttft = stats.entries[("ok", "TTFT")]
        gaps = stats.entries[("ok", "InterChunk")]
        assert ok.num_requests > 50 and ok.num_failures == 0
        assert throttled.num_requests > 5 and throttled.num_failures == throttled.num_requests
        assert streamed.num_requests > 5 and streamed.num_failures == 0
        assert ttft.num_requests >= streamed.num_requests and gaps.num_requests >= streamed.num_requests
        # each stream's first token comes before its end (two 5-ms gaps later): so does the fastest one's.
        # (Means are no relation: TTFT also counts the streams quit cut short, slow on a busy machine.)
        assert ttft.min_response_time < streamed.min_response_time
        errors = {str(e.error): e.occurrences for e in stats.errors.values()}
        assert errors == {"ThrottlingException: Rate exceeded": throttled.num_failures}
        # one HTTP request per reported call: no hidden retries (quit may cut a few in flight)
        sent = server.hits["/endpoints/ok/invocations"]
        assert 0 <= sent - (ok.num_requests + throttled.num_requests) <= 4
        assert "HTTP_X_AMZ_SECURITY_TOKEN" in server.seen[-1]


def test_user_without_endpoint_name_stops_with_a_hint():
    class Nameless(SageMakerUser):
        region = REGION

    with pytest.raises(StopTest, match="endpoint_name"):
        Nameless(Environment())


def test_the_alias_is_a_sagemaker_user_on_the_fast_transport(aws_env):
    class Ranker(FastSageMakerUser):
        endpoint_name = "ok"
        endpoint_url = "http://127.0.0.1:9"

    user = Ranker(Environment())
    assert isinstance(user, SageMakerUser) and user.client.transport == "fast"
    assert (user.pool_size, user.connect_timeout, user.read_timeout) == (
        SageMakerUser.pool_size, SageMakerUser.connect_timeout, SageMakerUser.read_timeout)


def test_locust_host_is_the_endpoint_url_when_none_is_set(aws_env):
    class Hosted(SageMakerUser):
        endpoint_name = "ok"
        host = "http://127.0.0.1:9"

    assert Hosted(Environment()).client.urls["InvokeEndpoint"] == "http://127.0.0.1:9/endpoints/ok/invocations"
