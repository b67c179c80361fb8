"""InvokeEndpointAsync against the local endpoint: both clients, the same entries and failures."""

from __future__ import annotations

import locust  # noqa: F401  (gevent monkey-patching before botocore)
from locust.env import Environment

import pytest

from sm_locust.invocation import INVOKE_ENDPOINT_ASYNC, Invocation
from sm_locust.transport import TRANSPORTS, create_client
from sm_locust.transport.contract import AsyncResult
from tests.conftest import SAMPLE_PAYLOAD

INPUT = "s3://my-bucket/inputs/request.json"


def _call(transport, url, invocation, location=INPUT):
    env = Environment()
    seen: list[dict] = []
    env.events.request.add_listener(lambda **kw: seen.append(kw))
    return create_client(transport, env, "ep", endpoint_url=url).invoke_async(invocation, location), seen


@pytest.fixture
def endpoint(module_endpoint):
    """The module's default endpoint: the tests only send to it (its counts read as differences)."""
    return module_endpoint


@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_async_accepted_with_fake_s3_locations(endpoint, transport):
    result, seen = _call(transport, endpoint.url, Invocation(body=SAMPLE_PAYLOAD.read_bytes(), inference_id="abc-1"))
    assert result == AsyncResult("abc-1", "s3://sm-locust-local/async-output/abc-1.out",
                                 "s3://sm-locust-local/async-failures/abc-1-error.out")
    [event] = seen
    assert (event["request_type"], event["name"], event["exception"], event["response_length"]) == (
        INVOKE_ENDPOINT_ASYNC, "ep", None, 0)


def test_async_faults_named_the_same(endpoint):
    before = endpoint.stats()
    texts = []
    for transport in TRANSPORTS:
        result, seen = _call(transport, endpoint.url,
                             Invocation(body=b"", custom_attributes="sm-locust-fault=ThrottlingException"))
        assert result is None
        texts.append(str(seen[-1]["exception"]))
    assert texts[0] == texts[1] == "ThrottlingException: Rate exceeded"
    stats = endpoint.stats()
    assert stats["requests"] - before["requests"] == stats["ThrottlingException"] - before["ThrottlingException"] == 2


def test_default_locustfile_operation_follows_the_options():
    from sm_locust.config.options import parse_options
    from sm_locust.transport.options import operation

    class Recorder:
        def __getattr__(self, method):
            return lambda *args: (method, args)

    client, inv = Recorder(), Invocation(body=b"{}")
    def opts(**given):
        return parse_options(given)

    assert operation(client, opts(stream=False, async_input_location=""))(inv) == ("invoke", (inv,))
    assert operation(client, opts(stream=True, async_input_location=INPUT))(inv) == ("invoke_stream", (inv,))
    assert operation(client, opts(stream=False, async_input_location=INPUT))(inv) == ("invoke_async",
                                                                                      (inv, INPUT, None))
    assert operation(client, opts())(inv) == ("invoke", (inv,))
