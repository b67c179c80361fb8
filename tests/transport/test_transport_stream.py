"""Response streams and async invocations: botocore and the fast path read the same bytes.

The fake runtime streams frames written by our encoder; botocore's sagemaker-runtime client
(`invoke_endpoint_with_response_stream`) and `FastSageMakerClient.invoke_stream` must see the same
PayloadParts and name mid-stream exceptions the same way.
"""

from __future__ import annotations

import json

import gevent
import locust  # noqa: F401  (gevent monkey-patching before botocore)
from locust.env import Environment

import pytest
from botocore.eventstream import EventStreamBuffer
from botocore.exceptions import ClientError, EventStreamError

from sm_locust.invocation import Invocation
from sm_locust.transport import eventstream as es
from sm_locust.transport.boto3 import name_error
from sm_locust.transport.contract import AsyncResult
from sm_locust.transport.errors import error_from_client_error
from sm_locust.transport.tokens import json_lines_with_token, whitespace_words
from tests.fakes import FakeRuntime, botocore_client, json_error, recorded, signed_client

TOKENS = [json.dumps({"token": {"text": w}}).encode() + b"\n" for w in ("Hello", " wor", "ld", "!")]


def test_encoder_frames_decode_identically_in_botocore():
    frames = [
        (es.encode_payload_part(b""), {":event-type": "PayloadPart"}, b""),
        (es.encode_payload_part(b"x" * 70000), {":message-type": "event"}, b"x" * 70000),
        (es.encode_event("PayloadPart", "é".encode(), content_type="text/plain"), {":content-type": "text/plain"},
         "é".encode()),
        (es.encode_exception("ModelStreamError", "boom", "E42"),
         {":exception-type": "ModelStreamError", ":message-type": "exception"},
         b'{"Message":"boom","ErrorCode":"E42"}'),  # compact, as tests/fixtures/wire/sagemaker
        (es.encode_error("Oops", "bad ünïcode"), {":error-code": "Oops", ":error-message": "bad ünïcode"}, b""),
        (es.encode_message({"n": 7, "t": True, "f": False, "b": b"\x00\x01"}, b"p"),
         {"n": 7, "t": True, "f": False, "b": b"\x00\x01"}, b"p"),
    ]
    buffer = EventStreamBuffer()
    buffer.add_data(b"".join(f for f, _, _ in frames))
    decoded = list(buffer)
    assert len(decoded) == len(frames)
    for message, (frame, headers, payload) in zip(decoded, frames, strict=True):
        assert message.payload == payload
        assert headers.items() <= message.headers.items()
        assert es.frame_length(frame) == len(frame)
    with pytest.raises(TypeError):
        es.encode_message({"x": 1.5})


def _stream(frames, delay=0.0, split=False):
    def handler(environ, body):
        def generate():
            for frame in frames:
                if delay:
                    gevent.sleep(delay)
                if split:  # a frame across two writes
                    yield frame[:7]
                    gevent.sleep(0.001)
                    yield frame[7:]
                else:
                    yield frame

        return 200, [("Content-Type", es.CONTENT_TYPE),
                     ("X-Amzn-SageMaker-Content-Type", "application/jsonlines")], generate()

    return handler


@pytest.fixture(scope="module")
def runtime():
    with FakeRuntime() as server:
        server.routes["tokens"] = _stream([es.encode_payload_part(t) for t in TOKENS], delay=0.02)
        server.routes["split"] = _stream([es.encode_payload_part(t) for t in TOKENS], split=True)
        server.routes["mid-error"] = _stream(
            [es.encode_payload_part(TOKENS[0]), es.encode_exception("ModelStreamError", "model crashed", "E1"),
             es.encode_payload_part(TOKENS[1])]
        )
        server.routes["internal"] = _stream([es.encode_exception("InternalStreamFailure", "stream broke")])
        server.routes["unmodeled"] = _stream([es.encode_payload_part(b"a"), es.encode_error("SomethingElse", "odd")])
        server.routes["other-events"] = _stream([es.encode_event("Unknown", b"zz"), es.encode_payload_part(b"only")])
        server.routes["http-error"] = lambda environ, body: json_error(424, "ModelError", "no", OriginalStatusCode=500)
        yield server


def _botocore_stream(url, endpoint):
    answer = botocore_client(url).invoke_endpoint_with_response_stream(EndpointName=endpoint, Body=b"{}",
                                                                       Accept="application/jsonlines")
    return [event["PayloadPart"]["Bytes"] for event in answer["Body"] if "PayloadPart" in event]


@pytest.mark.parametrize("endpoint", ["tokens", "split", "other-events"])
def test_stream_parsed_identically(runtime, endpoint):
    env = Environment()
    seen = recorded(env)
    client = signed_client("fast", env, runtime.url, endpoint, token_counter=json_lines_with_token)
    response = client.invoke_stream(Invocation(body=b"{}", accept="application/jsonlines"))
    assert response is not None, seen
    assert response.chunks == _botocore_stream(runtime.url, endpoint)
    assert response.body == b"".join(response.chunks)
    kinds = [e["request_type"] for e in seen]
    assert kinds[0] == "TTFT" and kinds[-1] == "InvokeEndpointWithResponseStream"
    total = seen[-1]
    assert total["exception"] is None and total["name"] == endpoint
    assert total["response_length"] == len(response.body)
    assert total["context"]["chunks"] == len(response.chunks)
    assert seen[0]["response_time"] <= total["response_time"]
    if endpoint == "tokens":
        assert response.tokens == total["context"]["tokens"] == 4
        assert kinds == ["TTFT", "InterChunk", "InvokeEndpointWithResponseStream"]
        assert seen[1]["response_length"] == 3  # gaps averaged
        assert 15 <= seen[1]["response_time"] <= 200
        assert seen[0]["response_time"] >= 15  # the first chunk waited for its delay
        assert len(response.inter_chunk_ms) == 3 and response.ttft_ms <= total["response_time"]
    # the accept header travels as X-Amzn-SageMaker-Accept, as botocore sends it
    assert runtime.seen[-1]["HTTP_X_AMZN_SAGEMAKER_ACCEPT"] == runtime.seen[-2]["HTTP_X_AMZN_SAGEMAKER_ACCEPT"]


def test_each_mode_fires_one_entry_per_gap(runtime):
    env = Environment()
    seen = recorded(env)
    signed_client("fast", env, runtime.url, "tokens", inter_chunk="each").invoke_stream(Invocation(body=b"{}"))
    assert [e["request_type"] for e in seen].count("InterChunk") == 3


@pytest.mark.parametrize("endpoint, code", [("mid-error", "ModelStreamError"), ("internal", "InternalStreamFailure"),
                                            ("unmodeled", "SomethingElse"), ("http-error", "ModelError")])
def test_stream_failures_named_as_botocore_names_them(runtime, endpoint, code):
    env = Environment()
    seen = recorded(env)
    assert signed_client("fast", env, runtime.url, endpoint).invoke_stream(Invocation(body=b"{}")) is None
    total = seen[-1]
    assert total["request_type"] == "InvokeEndpointWithResponseStream"
    assert total["exception"].code == code
    with pytest.raises(ClientError) as caught:  # EventStreamError is a ClientError
        _botocore_stream(runtime.url, endpoint)
    if endpoint != "http-error":
        assert isinstance(caught.value, EventStreamError)
    assert str(total["exception"]) == str(error_from_client_error(caught.value))
    assert str(total["exception"]) == str(name_error(caught.value))
    if endpoint == "mid-error":  # the chunk before the error was timed, the rest still read
        assert [e["request_type"] for e in seen] == ["TTFT", "InvokeEndpointWithResponseStream"]
        assert str(total["exception"]) == "ModelStreamError: model crashed"


def test_connection_is_reused_after_streams(runtime):
    env = Environment()
    client = signed_client("fast", env, runtime.url, "mid-error", pool_size=1)
    for _ in range(3):
        client.invoke_stream(Invocation(body=b"{}"))
    client.invoke(Invocation(body=b"ping"))  # the pool's one connection is clean again


def test_token_counters():
    body = b'data: {"token": {"text": "a"}}\n\ndata: {"token": {"text": "b"}}\n{"generated_text": "ab"}\n{"tok'
    assert json_lines_with_token(body) == 2
    assert whitespace_words(b"one two\nthree  ") == 3


def test_async_invocation(runtime):
    def accepted(environ, body):
        headers = [("X-Amzn-SageMaker-OutputLocation", "s3://bucket/out/abc.out"),
                   ("X-Amzn-SageMaker-FailureLocation", "s3://bucket/fail/abc.out"),
                   ("Content-Type", "application/json")]
        return 202, headers, json.dumps({"InferenceId": "abc"}).encode()

    runtime.routes["async"] = accepted
    env = Environment()
    seen = recorded(env)
    client = signed_client("fast", env, runtime.url, "async")
    response = client.invoke_async(Invocation(body=b"", content_type="text/csv", accept="application/json",
                                              target_model="ignored"), "s3://bucket/in/x.csv")
    assert response == AsyncResult("abc", "s3://bucket/out/abc.out", "s3://bucket/fail/abc.out")
    assert seen[-1]["request_type"] == "InvokeEndpointAsync" and seen[-1]["exception"] is None
    fast_request = runtime.seen[-1]
    boto = botocore_client(runtime.url).invoke_endpoint_async(EndpointName="async",
                                                              InputLocation="s3://bucket/in/x.csv",
                                                              ContentType="text/csv", Accept="application/json")
    assert (boto["InferenceId"], boto["OutputLocation"]) == ("abc", "s3://bucket/out/abc.out")
    boto_request = runtime.seen[-1]
    for key in ("HTTP_X_AMZN_SAGEMAKER_INPUTLOCATION", "HTTP_X_AMZN_SAGEMAKER_CONTENT_TYPE",
                "HTTP_X_AMZN_SAGEMAKER_ACCEPT", "RAW_URI"):
        assert fast_request[key] == boto_request[key]
    assert "HTTP_X_AMZN_SAGEMAKER_TARGET_MODEL" not in fast_request
    runtime.routes["async"] = lambda environ, body: json_error(400, "ValidationError", "InputLocation is required")
    assert client.invoke_async(Invocation(body=b"")) is None
    assert str(seen[-1]["exception"]) == "ValidationError: InputLocation is required"
