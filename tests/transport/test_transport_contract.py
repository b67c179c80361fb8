"""One transport contract: the same scenario through `fast` and `boto3` gives the same Locust entries.

The scenario runs in-process against the fake runtime (tests/fakes.py, signatures checked): a
successful InvokeEndpoint, a throttled call, a ModelError, a response stream, an async call and a
connection refused. Both transports must leave identical `(request_type, name)` entries with the
same counts and byte counts, and identical failures (method, name, text, occurrences) in
`environment.stats.errors`. Then the contract's other promises: results, the validation hook,
fan-out through `send`, the User building its client from `transport`, and the timing helper.
"""

from __future__ import annotations

import dataclasses
import json

import gevent
import locust  # noqa: F401  (gevent monkey-patching before botocore)
from locust.env import Environment

import pytest

from sm_locust.invocation import INVOKE_ENDPOINT, Invocation, InvocationError, error_code
from sm_locust.payloads.split import PARTS
from sm_locust.transport import TRANSPORTS
from sm_locust.transport import eventstream as es
from sm_locust.transport.contract import AsyncResult, InvokeResult, Measurement, SageMakerClient, StreamResult
from sm_locust.users import SageMakerUser
from sm_locust.users.fanout import INVOKE_ENDPOINT_SPLIT, invoke_split
from tests.fakes import ACCESS_KEY, SECRET_KEY, FakeRuntime, json_error, recorded, signed_client

VARIANT = ("x-Amzn-Invoked-Production-Variant", "AllTraffic")
WORDS = (b"one ", b"two ", b"three")


def runtime_api(environ, body):
    """InvokeEndpoint (echo; `throttled` / `broken` target variants fail), the stream and async routes."""
    path = environ["RAW_URI"]
    if path.endswith("/invocations-response-stream"):
        def frames():
            for word in WORDS:
                gevent.sleep(0.002)
                yield es.encode_payload_part(word)

        return 200, [("Content-Type", es.CONTENT_TYPE), ("X-Amzn-SageMaker-Content-Type", "text/plain"),
                     VARIANT], frames()
    if path.endswith("/async-invocations"):
        return 202, [("X-Amzn-SageMaker-OutputLocation", "s3://b/out/i-1.out"),
                     ("X-Amzn-SageMaker-FailureLocation", "s3://b/fail/i-1.out"),
                     ("Content-Type", "application/json")], json.dumps({"InferenceId": "i-1"}).encode()
    target = environ.get("HTTP_X_AMZN_SAGEMAKER_TARGET_VARIANT")
    if target == "throttled":
        return json_error(400, "ThrottlingException", "Rate exceeded")
    if target == "broken":
        return json_error(424, "ModelError", "Received client error (400) from primary with message \"bad\"",
                          OriginalStatusCode=400, OriginalMessage="bad", LogStreamArn="arn:aws:logs:x")
    return 200, [("Content-Type", environ.get("CONTENT_TYPE") or "application/json"), VARIANT], body


@pytest.fixture(scope="module")
def runtime():
    with FakeRuntime() as server:
        server.routes["ep"] = runtime_api
        yield server


def _scenario(transport: str, url: str, refused_url: str) -> tuple[dict, dict, list]:
    env = Environment()
    env.create_local_runner()  # the runner records request events into env.stats
    client = signed_client(transport, env, url)
    body = Invocation(body=b'{"instances": [[1, 2]]}')
    results = [client.invoke(body) for _ in range(3)]
    results += [client.invoke(Invocation(body=b"{}", target_variant="throttled")) for _ in range(2)]
    results.append(client.invoke(Invocation(body=b"{}", target_variant="broken")))
    results += [client.invoke_stream(Invocation(body=b"{}", accept="text/plain")) for _ in range(2)]
    results.append(client.invoke_async(Invocation(body=b"{}"), "s3://b/in/x.json"))
    refused = signed_client(transport, env, refused_url, connect_timeout=2.0)
    results.append(refused.invoke(body, name="refused"))
    entries = {key: (e.num_requests, e.num_failures, e.total_content_length) for key, e in env.stats.entries.items()}
    errors = {(e.method, e.name, str(e.error)): e.occurrences for e in env.stats.errors.values()}
    return entries, errors, results


@pytest.mark.e2e
def test_the_same_scenario_gives_the_same_entries_and_errors_with_either_transport(runtime, refused_url):
    outcomes = {transport: _scenario(transport, runtime.url, refused_url) for transport in TRANSPORTS}
    (fast_entries, fast_errors, fast_results), (boto_entries, boto_errors, boto_results) = (
        outcomes["fast"], outcomes["boto3"])
    assert fast_entries == boto_entries
    assert fast_errors == boto_errors
    body_length = len(b'{"instances": [[1, 2]]}')
    assert fast_entries == {
        ("ep", INVOKE_ENDPOINT): (3, 0, 3 * body_length),
        ("ep/throttled", INVOKE_ENDPOINT): (2, 2, 0),
        ("ep/broken", INVOKE_ENDPOINT): (1, 1, 0),
        ("ep", "TTFT"): (2, 0, 2 * len(WORDS[0])),
        ("ep", "InterChunk"): (2, 0, 2 * (len(WORDS) - 1)),
        ("ep", "InvokeEndpointWithResponseStream"): (2, 0, 2 * len(b"".join(WORDS))),
        ("ep", "InvokeEndpointAsync"): (1, 0, 0),
        ("refused", INVOKE_ENDPOINT): (1, 1, 0),
    }
    assert {(method, name, error_code(text)): n for (method, name, text), n in fast_errors.items()} == {
        (INVOKE_ENDPOINT, "ep/throttled", "ThrottlingException"): 2,
        (INVOKE_ENDPOINT, "ep/broken", "ModelError"): 1,
        (INVOKE_ENDPOINT, "refused", "EndpointConnectionError"): 1,
    }
    assert (INVOKE_ENDPOINT, "ep/broken", 'ModelError: (original status 400) Received client error (400) from '
            'primary with message "bad"') in fast_errors
    assert _untimed(fast_results) == _untimed(boto_results)  # the same result objects, field by field
    assert fast_results[0] == InvokeResult(b'{"instances": [[1, 2]]}', "application/json", "AllTraffic")
    stream = fast_results[6]
    assert isinstance(stream, StreamResult) and stream.body == b"".join(WORDS) and stream.chunks == list(WORDS)
    assert stream.ttft_ms > 0 and len(stream.inter_chunk_ms) == 2 and stream.content_type == "text/plain"
    assert fast_results[8] == AsyncResult("i-1", "s3://b/out/i-1.out", "s3://b/fail/i-1.out")
    assert fast_results[3:6] == [None] * 3 and fast_results[-1] is None


def _untimed(results: list) -> list:
    return [dataclasses.replace(r, ttft_ms=None, inter_chunk_ms=[]) if isinstance(r, StreamResult) else r
            for r in results]


class RejectAll:
    def validate(self, body, content_type, invocation):
        return InvocationError("InvalidResponse", f"{len(body)} bytes of {content_type}")


@pytest.mark.e2e
@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_validation_hook_runs_after_timing_in_either_transport(runtime, transport):
    env = Environment()
    seen = recorded(env)
    client = signed_client(transport, env, runtime.url)
    client.validator = RejectAll()
    result, error = client.send(Invocation(body=b"{}", target_variant="blue"))
    assert result is None and str(error) == "InvalidResponse: 2 bytes of application/json"
    [event] = seen
    assert (event["request_type"], event["name"], event["response_length"], event["exception"]) == (
        INVOKE_ENDPOINT, "ep/blue", 2, error)
    assert event["context"] == {"endpoint": "ep", "variant": "AllTraffic", "target": None}


@pytest.mark.e2e
@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_fanout_sends_parts_through_either_client(runtime, transport):
    env = Environment()
    seen = recorded(env)
    client = signed_client(transport, env, runtime.url)
    parts = (Invocation(body=b"[1]"), Invocation(body=b"{}", target_variant="throttled"))
    results = invoke_split(client, Invocation(body=b"[1]{}", extra={PARTS: parts}))
    assert results[0] == InvokeResult(b"[1]", "application/json", "AllTraffic") and results[1] is None
    assert sorted((e["request_type"], e["name"]) for e in seen) == [
        (INVOKE_ENDPOINT, "ep/part"), (INVOKE_ENDPOINT, "ep/part"), (INVOKE_ENDPOINT_SPLIT, "ep")]
    assert str(seen[-1]["exception"]) == "ThrottlingException: Rate exceeded"
    assert seen[-1]["response_length"] == 3 and seen[-1]["context"] == {"endpoint": "ep", "parts": 2}


@pytest.mark.e2e
@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_user_builds_its_client_from_transport(runtime, transport, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)

    class Invoker(SageMakerUser):
        endpoint_name = "ep"
        endpoint_url = runtime.url

    Invoker.transport = transport
    env = Environment()
    user = Invoker(env)
    assert type(user.client) is TRANSPORTS.get(transport) and Invoker(env).client is user.client  # one per process
    assert user.invoke(b"{}") == InvokeResult(b"{}", "application/json", "AllTraffic")


class Hook:
    def __init__(self):
        self.fired: list[dict] = []

    def fire(self, **kw):
        self.fired.append(kw)


def test_measurement_reports_exceptions_and_lets_a_stopping_user_go():
    hook = Hook()
    with Measurement(hook, "Op", "n", started=0.0) as request:  # perf_counter 0: long ago
        raise ConnectionRefusedError("no")
    [event] = hook.fired
    assert str(event["exception"]) == "ConnectionRefusedError: no" and event["response_time"] > 0
    assert request.exception is event["exception"]
    with pytest.raises(gevent.GreenletExit):
        with Measurement(hook, "Op", "n"):
            raise gevent.GreenletExit()
    assert len(hook.fired) == 1  # stopped, not reported
    with Measurement(hook, "Op", "n", {"k": 1}) as request:
        request.response_length = 7
        request.stop()
        gevent.sleep(0.05)  # after stop(): not timed
    assert hook.fired[-1]["response_time"] < 40 and hook.fired[-1]["response_length"] == 7
    assert hook.fired[-1]["context"] == {"k": 1} and hook.fired[-1]["exception"] is None


def test_the_contract_cannot_be_built_without_a_transport():
    with pytest.raises(TypeError, match="abstract"):
        SageMakerClient(Environment(), "ep")


@pytest.mark.e2e
@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_a_stream_the_chunk_listener_finds_an_in_band_error_in_is_that_failure(runtime, transport):
    """An LLM container's error event inside a 200 stream: the listener (the token accounting) names it, the
    stream's one entry reports it, in Locust's failure table under that name; TTFT was still timed."""
    env = Environment()
    env.create_local_runner()
    client = signed_client(transport, env, runtime.url)
    client.chunk_listener = lambda payload: (InvocationError("TGI.generation", "boom\x1b[31m") if payload == WORDS[1]
                                             else None)
    assert client.invoke_stream(Invocation(body=b"{}", accept="text/plain")) is None
    client.chunk_listener = None
    assert client.invoke_stream(Invocation(body=b"{}", accept="text/plain")) is not None
    stream = env.stats.entries[("ep", "InvokeEndpointWithResponseStream")]
    assert (stream.num_requests, stream.num_failures) == (2, 1)
    assert env.stats.entries[("ep", "TTFT")].num_requests == 2
    assert [str(e.error) for e in env.stats.errors.values()] == ["TGI.generation: boom\\x1b[31m"]  # no escape: shown
