"""The local endpoint's response streams, read by botocore's event-stream parser and by the fast
path: the same chunks, the same failures, the same Locust entries from both Users' clients."""

from __future__ import annotations

import locust  # noqa: F401  (gevent monkey-patching before botocore)
from locust.env import Environment

import orjson
import pytest
from botocore.exceptions import ClientError, EventStreamError

from sm_locust.endpoint.codecs import decode_request
from sm_locust.endpoint.model import RankingModel
from sm_locust.endpoint.streaming import tokens_for
from sm_locust.invocation import INVOKE_ENDPOINT_STREAM, Invocation
from sm_locust.transport import TRANSPORTS, create_client
from sm_locust.transport.boto3 import make_boto3_client, name_error
from sm_locust.transport.tokens import json_lines_with_token
from tests.conftest import SAMPLE_PAYLOAD

BODY = SAMPLE_PAYLOAD.read_bytes()
FIRST_TOKEN_MS, TOKEN_MS = 30.0, 4.0


@pytest.fixture(scope="module")
def streaming(tmp_path_factory):
    from sm_locust.endpoint.server import LocalEndpoint

    log = tmp_path_factory.mktemp("ep") / "endpoint.log"
    with LocalEndpoint(first_token_ms=FIRST_TOKEN_MS, token_ms=TOKEN_MS, log_path=log) as ep:
        yield ep


@pytest.fixture(autouse=True)
def _credentials(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


def _botocore_chunks(url: str, **kwargs) -> list[bytes]:
    answer = make_boto3_client(endpoint_url=url).invoke_endpoint_with_response_stream(EndpointName="ep", Body=BODY,
                                                                                      **kwargs)
    return [event["PayloadPart"]["Bytes"] for event in answer["Body"] if "PayloadPart" in event]


def _recorded(transport: str, url: str, invocation: Invocation):
    env = Environment()
    seen: list[dict] = []
    env.events.request.add_listener(lambda **kw: seen.append(kw))
    client = create_client(transport, env, "ep", endpoint_url=url)
    return client.invoke_stream(invocation), seen


def _shape(seen: list[dict]) -> list[tuple]:
    """What must agree between transports: entry, name, length, failure text (not the timings)."""
    return [(e["request_type"], e["name"], e["response_length"], str(e["exception"]) if e["exception"] else None)
            for e in seen]


@pytest.mark.e2e
def test_stream_parsed_identically_by_botocore_and_the_fast_path(streaming):
    expected = tokens_for(RankingModel().predict(*decode_request(BODY, "application/json", None)))
    assert _botocore_chunks(streaming.url) == expected  # botocore's own EventStream parser
    results = {}
    for transport in TRANSPORTS:
        result, seen = _recorded(transport, streaming.url, Invocation(body=BODY))
        assert result is not None, seen
        assert result.chunks == expected and result.body == b"".join(expected)
        assert result.content_type == "application/jsonlines" and result.variant == "AllTraffic"
        assert json_lines_with_token(result.body) == len(expected) == 10
        assert result.ttft_ms >= FIRST_TOKEN_MS * 0.9
        assert len(result.inter_chunk_ms) == len(expected) - 1
        ttft, gaps, total = seen
        assert ttft["response_time"] >= FIRST_TOKEN_MS * 0.9
        # the mean gap is the client's reading pace (a late client reads buffered chunks back to back):
        # it fits between the first chunk and the end, and the whole stream took the server's pacing
        assert 0 <= ttft["response_time"] + 9 * gaps["response_time"] <= total["response_time"] + 1e-6
        assert total["response_time"] >= (FIRST_TOKEN_MS + 9 * TOKEN_MS) * 0.9
        assert total["context"]["chunks"] == 10 and total["response_time"] >= ttft["response_time"]
        results[transport] = _shape(seen)
    assert results["boto3"] == results["fast"] == [
        ("TTFT", "ep", len(expected[0]), None), ("InterChunk", "ep", 9, None),
        (INVOKE_ENDPOINT_STREAM, "ep", len(b"".join(expected)), None)]


@pytest.mark.e2e
@pytest.mark.parametrize("fault", ["ModelStreamError", "InternalStreamFailure", "ThrottlingException", "ModelError"])
def test_stream_failures_identical_in_both_clients_and_botocore(streaming, fault):
    attributes = f"sm-locust-fault={fault}"
    with pytest.raises(ClientError) as caught:
        _botocore_chunks(streaming.url, CustomAttributes=attributes)
    if fault.endswith(("StreamError", "StreamFailure")):
        assert isinstance(caught.value, EventStreamError)  # a 200 whose stream carries the error
    shapes = []
    for transport in TRANSPORTS:
        result, seen = _recorded(transport, streaming.url, Invocation(body=BODY, custom_attributes=attributes))
        assert result is None
        assert seen[-1]["exception"].code == fault
        assert str(seen[-1]["exception"]) == str(name_error(caught.value))
        shapes.append(_shape(seen))
    assert shapes[0] == shapes[1]
    if fault == "ModelStreamError":  # half the tokens came before the error: TTFT and gaps were timed
        assert [kind for kind, *_ in shapes[0]] == ["TTFT", "InterChunk", INVOKE_ENDPOINT_STREAM]


@pytest.mark.e2e
def test_stream_error_ratio_and_token_count(endpoint_factory):
    ep = endpoint_factory(stream_tokens=25, stream_error_ratio=1.0)
    for transport in TRANSPORTS:
        result, seen = _recorded(transport, ep.url, Invocation(body=BODY))
        assert result is None and seen[-1]["exception"].code == "ModelStreamError"
        assert seen[-1]["context"]["chunks"] == 12  # half of 25, then the error
    stats = ep.stats()
    assert stats["requests"] == stats["invocations"] == 2 and stats["successes"] == 0


@pytest.mark.e2e
def test_stream_tokens_option(endpoint_factory):
    ep = endpoint_factory(stream_tokens=3)
    result, _ = _recorded("fast", ep.url, Invocation(body=BODY))
    assert [orjson.loads(c)["token"]["id"] for c in result.chunks] == [0, 1, 2]
