"""No hidden re-sends: a server that reads each request and closes without answering sees exactly one
POST per invocation, on both transports, and each invocation is one failure counted under its name.

geventhttpclient before 2.6 re-sent any request, POST included, when the connection closed before the
answer (up to pool size + 1 times): 5,394 POSTs for 4 counted requests in issue 11. The fast transport
writes its requests itself (one attempt), botocore runs with retries off, and pyproject's floor keeps
geventhttpclient at a release that re-sends only idempotent methods (checked here too).
"""

from __future__ import annotations

from collections import Counter

import locust  # noqa: F401  (gevent monkey-patching before botocore)
from gevent.server import StreamServer
from locust.env import Environment

import pytest

from sm_locust.invocation import Invocation
from tests.fakes import signed_client

pytestmark = pytest.mark.e2e  # every test here starts a server, a process or Locust

CLOSED = "ConnectionClosedError: Connection was closed before we received a valid response from endpoint URL"
INVOCATIONS = 3


class ClosingServer:
    """Reads each request (its head, then `Content-Length` bytes of body unless `read_body` is False)
    and closes the connection without a byte of answer; counts what arrived as `METHOD path`."""

    def __init__(self, read_body: bool = True):
        self.read_body = read_body
        self.requests: Counter[str] = Counter()
        self._server = StreamServer(("127.0.0.1", 0), self._handle)

    def _handle(self, sock, _address) -> None:
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ")
            self.requests[f"{method} {path}"] += 1
            length = next((int(line.split(":", 1)[1]) for line in lines[1:]
                           if line.lower().startswith("content-length:")), 0)
            while self.read_body and len(rest) < length:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                rest += chunk
        finally:
            sock.close()  # no answer

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def __enter__(self) -> ClosingServer:
        self._server.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.stop(timeout=1)


@pytest.mark.parametrize("transport", ["fast", "boto3"])
@pytest.mark.parametrize("body_size, read_body", [(1024, True), (4 * 1024 * 1024, False)],
                         ids=["closed-after-the-request", "closed-before-the-body"])
def test_a_connection_closed_before_the_answer_is_one_post_and_one_failure(transport, body_size, read_body):
    env = Environment()
    env.create_local_runner()  # Locust's own statistics listener: what the run would count
    with ClosingServer(read_body=read_body) as server:
        client = signed_client(transport, env, server.url, endpoint="ep", pool_size=4)
        try:
            for _ in range(INVOCATIONS):
                assert client.invoke(Invocation(body=b"x" * body_size)) is None
        finally:
            client.close()
    assert server.requests == {"POST /endpoints/ep/invocations": INVOCATIONS}
    stats = env.stats
    assert (stats.total.num_requests, stats.total.num_failures) == (INVOCATIONS, INVOCATIONS)
    errors = list(stats.errors.values())
    assert [(e.method, e.name, e.occurrences) for e in errors] == [("InvokeEndpoint", "ep", INVOCATIONS)]
    assert str(errors[0].error).startswith("ConnectionClosedError: "), errors[0].error
    if read_body:
        assert str(errors[0].error) == CLOSED


def test_stream_and_async_are_sent_once_too():
    env = Environment()
    env.create_local_runner()
    with ClosingServer() as server:
        client = signed_client("fast", env, server.url, endpoint="ep", pool_size=4)
        assert client.invoke_stream(Invocation(body=b"{}")) is None
        assert client.invoke_async(Invocation(body=b"{}"), "s3://bucket/key") is None
        client.close()
    assert server.requests == {"POST /endpoints/ep/invocations-response-stream": 1,
                               "POST /endpoints/ep/async-invocations": 1}
    assert env.stats.total.num_failures == 2


def test_installed_geventhttpclient_re_sends_no_post():
    """The floor in pyproject (geventhttpclient>=2.6): its own HTTPClient.request, which Locust's
    FastHttpUser uses, sends a POST once when the connection closes before the answer."""
    from geventhttpclient import HTTPClient
    from geventhttpclient.response import HTTPParseError

    with ClosingServer() as server:
        http = HTTPClient("127.0.0.1", port=int(server.url.rsplit(":", 1)[1]), concurrency=4)
        with pytest.raises((HTTPParseError, OSError)):
            http.request("POST", "/endpoints/ep/invocations", body=b"{}")
        http.close()
    assert server.requests == {"POST /endpoints/ep/invocations": 1}


def test_a_header_value_with_cr_lf_is_refused_and_nothing_is_sent():
    """The request head is written by the fast transport itself: a custom attribute cannot smuggle a
    second request or header onto the wire (the same check geventhttpclient makes)."""
    env = Environment()
    env.create_local_runner()
    with ClosingServer() as server:
        client = signed_client("fast", env, server.url, endpoint="ep")
        smuggled = "a=1\r\n\r\nPOST /endpoints/other/invocations HTTP/1.1"
        assert client.invoke(Invocation(body=b"{}", custom_attributes=smuggled)) is None
        client.close()
    assert server.requests == {}
    (error,) = env.stats.errors.values()
    assert str(error.error).startswith("ValueError: invalid value for header field "
                                       "'X-Amzn-SageMaker-Custom-Attributes'")
