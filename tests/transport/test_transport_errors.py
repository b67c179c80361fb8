"""The same error responses get the same codes and messages from botocore and from the fast path.

Each case is served by the fake runtime to a botocore client (retries off) and to
FastSageMakerClient; botocore's `ClientError.response` and our `parse_error_response` must agree,
and the failure text must equal the boto3 path's (`sm_locust.transport.boto3.name_error`).
"""

from __future__ import annotations

import json
import socket

import gevent
import locust  # noqa: F401  (gevent monkey-patching before botocore)
from gevent.server import StreamServer
from locust.env import Environment

import pytest
from botocore.exceptions import BotoCoreError, ClientError

from sm_locust.invocation import Invocation
from sm_locust.transport.boto3 import name_error
from sm_locust.transport.errors import error_from_client_error, parse_error_response
from tests.fakes import FakeRuntime, botocore_client, recorded, signed_client

ERRORTYPE = "x-amzn-ErrorType"
MODEL_ERROR_BODY = {
    "ErrorCode": "CLIENT_ERROR_FROM_MODEL",
    "LogStreamArn": "arn:aws:logs:us-west-2:123456789012:log-group:/aws/sagemaker/Endpoints/e",
    "Message": 'Received client error (400) from primary with message "bad input". See logs.',
    "OriginalMessage": "bad input",
    "OriginalStatusCode": 400,
}

CASES = {
    "validation-400": (400, [(ERRORTYPE, "ValidationError:http://internal.amazon.com/coral/com.amazon.sage/")],
                       {"message": "Endpoint e of account 1 not found."}),
    "validation-body-code": (400, [], {"code": "ValidationError", "Message": "1 validation error detected"}),
    "model-error-424": (424, [(ERRORTYPE, "ModelError:http://internal.amazon.com/coral/com.amazon.sage/")],
                        MODEL_ERROR_BODY),
    "model-not-ready-429": (429, [(ERRORTYPE, "ModelNotReadyException:")], {"message": "Model is not ready"}),
    "throttling-400": (400,
                       [(ERRORTYPE,
                         "ThrottlingException:http://internal.amazon.com/coral/com.amazon.coral.availability/")],
                       {"message": "Rate exceeded"}),
    "throttling-429": (429, [("X-Amzn-Errortype", "ThrottlingException")], {"message": "Rate exceeded"}),
    "internal-failure-500": (500, [(ERRORTYPE, "InternalFailure:http://internal.amazon.com/coral/com.amazon.sage/")],
                             {"message": "An internal failure occurred."}),
    "service-unavailable-503": (503, [(ERRORTYPE, "ServiceUnavailable:")],
                                {"Message": "Service is unavailable, try again"}),
    "dependency-530": (530, [(ERRORTYPE, "InternalDependencyException")], {"message": "dependency down"}),
    "type-field-400": (400, [], {"__type": "com.amazon.coral.service#SerializationException", "Message": "bad json"}),
    "5xx-empty": (502, [], b""),
    "5xx-html": (504, [("Content-Type", "text/html")], b"<html><body><b>Http/1.1 Gateway Timeout</b></body></html>"),
    "4xx-html": (403, [("Content-Type", "text/html")], b"<HTML>Forbidden</HTML>"),
    "4xx-empty": (404, [], b""),
    "5xx-text": (500, [], b"upstream connect error"),
}


def _route(status, headers, body):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()

    def handler(environ, request_body):
        return status, headers, raw

    return handler


@pytest.fixture(scope="module")
def runtime():
    with FakeRuntime() as server:
        for name, case in CASES.items():
            server.routes[name] = _route(*case)
        yield server


@pytest.mark.e2e
@pytest.mark.parametrize("case", list(CASES))
def test_same_code_and_message_as_botocore(runtime, case):
    status, headers, body = CASES[case]
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    with pytest.raises(ClientError) as caught:
        botocore_client(runtime.url).invoke_endpoint(EndpointName=case, Body=b"{}")
    boto = caught.value.response
    ours = parse_error_response(status, dict(headers), raw)
    assert ours["Error"]["Code"] == boto["Error"]["Code"]
    assert ours["Error"]["Message"] == boto["Error"]["Message"]
    for field in ("OriginalStatusCode", "OriginalMessage", "LogStreamArn"):
        assert ours.get(field) == boto.get(field)

    env = Environment()
    seen = recorded(env)
    assert signed_client("fast", env, runtime.url, case).invoke(Invocation(body=b"{}")) is None
    (event,) = seen
    assert event["request_type"] == "InvokeEndpoint" and event["name"] == case
    error = event["exception"]
    assert repr(error) == str(error) == str(error_from_client_error(caught.value))
    assert str(error) == str(name_error(caught.value))  # what the boto3 SageMakerClient reports
    assert error.code == boto["Error"]["Code"] and error.status == status
    assert runtime.hits[f"/endpoints/{case}/invocations"] == 2  # one each: no hidden retry


@pytest.mark.e2e
def test_model_error_keeps_the_original_status(runtime):
    env = Environment()
    seen = recorded(env)
    signed_client("fast", env, runtime.url, "model-error-424").invoke(Invocation(body=b"{}"), name="renamed")
    assert seen[-1]["name"] == "renamed"
    assert str(seen[-1]["exception"]).startswith("ModelError: (original status 400) Received client error (400)")
    assert seen[-1]["exception"].status == 424


def test_codes_without_botocore_round_trip():
    # cases botocore handles without a server: query-compatible header, a 300, a non-object body
    parsed = parse_error_response(400, {"x-amzn-query-error": "AWS.SimpleQueueService.X;Sender"},
                                  b'{"__type":"a#QueueDoesNotExist","message":"m"}')
    assert parsed["Error"] == {"Code": "AWS.SimpleQueueService.X", "Message": "m",
                               "QueryErrorCode": "QueueDoesNotExist", "Type": "Sender"}
    assert parse_error_response(300, {}, b"") == {}
    assert parse_error_response(400, {}, b"[1]")["Error"] == {"Code": "400", "Message": "[1]"}


def _botocore_failure(url, **config):
    client = botocore_client(url, **config)
    with pytest.raises(BotoCoreError) as caught:
        client.invoke_endpoint(EndpointName="x", Body=b"{}")
    assert type(caught.value).__name__ == name_error(caught.value).code
    return name_error(caught.value).code, name_error(caught.value).message


def _fast_failure(url, **kw):
    env = Environment()
    seen = recorded(env)
    assert signed_client("fast", env, url, "x", **kw).invoke(Invocation(body=b"{}")) is None
    error = seen[0]["exception"]
    return error.code, error.message


@pytest.mark.e2e
def test_connection_refused_is_endpoint_connection_error(refused_url):
    url = refused_url
    assert _fast_failure(url) == _botocore_failure(url)
    assert _fast_failure(url)[0] == "EndpointConnectionError"


@pytest.mark.e2e
def test_read_timeout_is_read_timeout_error(runtime):
    def slow(environ, body):
        gevent.sleep(1.0)
        return 200, [], b"late"

    runtime.routes["x"] = slow
    try:
        fast = _fast_failure(runtime.url, read_timeout=0.2)
        boto = _botocore_failure(runtime.url, read_timeout=0.2)
    finally:
        del runtime.routes["x"]
    assert fast == boto
    assert fast[0] == "ReadTimeoutError"


@pytest.mark.e2e
def test_connect_timeout_is_connect_timeout_error():
    # a listening socket with a full backlog never completes the handshake in time
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    fillers = []
    try:
        for _ in range(4):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(listener.getsockname())
            fillers.append(s)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        code, message = _fast_failure(url, connect_timeout=0.2)
    finally:
        for s in fillers:
            s.close()
        listener.close()
    assert code in ("ConnectTimeoutError", "EndpointConnectionError"), message
    if code == "ConnectTimeoutError":
        assert message == "Connect timeout on endpoint URL"


@pytest.mark.e2e
@pytest.mark.parametrize("reply", [b"", b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"])
def test_closed_connection_is_connection_closed_error(reply):
    def handle(sock, address):
        sock.recv(65536)
        if reply:
            sock.sendall(reply)
        sock.close()

    server = StreamServer(("127.0.0.1", 0), handle)
    server.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        fast = _fast_failure(url)
        if not reply:  # botocore names a short body differently (urllib3 IncompleteRead)
            assert fast == _botocore_failure(url)
        assert fast[0] == "ConnectionClosedError"
    finally:
        server.stop()
