"""`FastClient` is a drop-in `SageMakerUser.client_cls`: same constructor, results, validation hook
and fan-out behaviour as the boto3 `SageMakerClient`, against the local endpoint."""

from __future__ import annotations

import locust  # noqa: F401  (gevent monkey-patching before botocore)

import pytest
from locust.env import Environment

from sm_locust.client import SageMakerClient
from sm_locust.invocation import InvocationError, Invocation
from sm_locust.transport.adapter import FastClient
from tests.conftest import SAMPLE_PAYLOAD

BODY = SAMPLE_PAYLOAD.read_bytes()


class RejectAll:
    def validate(self, body, content_type, invocation):
        return InvocationError("InvalidResponse", f"{len(body)} bytes of {content_type}")


def _client(cls, url):
    env = Environment()
    seen: list[dict] = []
    env.events.request.add_listener(lambda **kw: seen.append(kw))
    client = cls(env, "ep", endpoint_url=url, profile=None, pool_size=4, connect_timeout=2.0, read_timeout=5.0)
    return client, seen


def test_same_results_and_validation_in_both_clients(endpoint):
    outcomes = []
    for cls in (SageMakerClient, FastClient):
        client, seen = _client(cls, endpoint.url)
        result = client.invoke(Invocation(body=BODY, target_variant="blue"))
        assert set(result) == {"body", "content_type", "variant"} and result["variant"] == "blue"
        client.validator = RejectAll()
        result, error = client.send(Invocation(body=BODY))
        assert result is None and error.code == "InvalidResponse"
        outcomes.append([(e["request_type"], e["name"], e["response_length"], str(e["exception"])) for e in seen])
        outcomes[-1].append(result)
    assert outcomes[0] == outcomes[1]


def test_fanout_sends_parts_through_the_fast_client(endpoint):
    from sm_locust.fanout import PARTS, invoke_split

    client, seen = _client(FastClient, endpoint.url)
    parts = (Invocation(body=BODY), Invocation(body=BODY, custom_attributes="sm-locust-fault=ThrottlingException"))
    results = invoke_split(client, Invocation(body=BODY, extra={PARTS: parts}))
    assert results[0] is not None and results[1] is None
    assert sorted(e["request_type"] for e in seen) == ["InvokeEndpoint", "InvokeEndpoint", "InvokeEndpointSplit"]
    assert str(seen[-1]["exception"]) == "ThrottlingException: Rate exceeded"


@pytest.mark.parametrize("transport, cls", [("fast", FastClient), ("boto3", SageMakerClient)])
def test_user_picks_the_client_from_transport(endpoint, transport, cls):
    from sm_locust.users import SageMakerUser

    class Invoker(SageMakerUser):
        endpoint_name = "ep"
        endpoint_url = endpoint.url

    Invoker.transport = transport
    assert type(Invoker(Environment()).client) is cls


def test_started_charges_the_wait_before_sending(endpoint):
    import time

    client, seen = _client(FastClient, endpoint.url)
    client.invoke(Invocation(body=BODY), started=time.perf_counter() - 0.5)  # intended 500 ms ago
    assert seen[-1]["response_time"] >= 500 and seen[-1]["start_time"] <= time.time() - 0.5
