"""SageMaker's response stream and error bodies: botocore, the client and the local endpoint's encoder
against the same byte-exact samples (tests/fixtures/wire/sagemaker/; docs/facts.md, "SageMaker
response stream and errors").

- `*.bin`: InvokeEndpointWithResponseStream bodies (event-stream frames: PayloadParts, one cut inside
  a UTF-8 character; a ModelStreamError; an InternalStreamFailure). `frames.json` is what botocore's
  own EventStream yields for each (checked again here, so a botocore change shows), and the fast
  client's reader must yield the same; the local endpoint's encoder must write the same bytes.
- `errors.json`: HTTP error responses (a ModelError carrying TGI's validation error, ThrottlingException,
  ...) and botocore's parse of each (`Error` plus the modeled fields); the fast client's parser must
  give the same.
"""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import locust  # noqa: F401  (gevent monkey-patching before botocore)

import botocore.session
import pytest
from botocore import parsers
from botocore.awsrequest import HeadersDict
from botocore.eventstream import EventStream, EventStreamBuffer
from botocore.exceptions import EventStreamError

from sm_locust.transport import eventstream as es
from sm_locust.transport.errors import error_from_stream_message, parse_error_response
from sm_locust.transport.fast import read_event_stream

WIRE = Path(__file__).resolve().parents[1] / "fixtures" / "wire" / "sagemaker"
FRAMES = json.loads((WIRE / "frames.json").read_text())
ERRORS = json.loads((WIRE / "errors.json").read_text())
MODEL = botocore.session.get_session().get_service_model("sagemaker-runtime")
OPERATION = MODEL.operation_model("InvokeEndpointWithResponseStream")


class _Raw:
    def __init__(self, data: bytes):
        self.data = data

    def stream(self):
        yield self.data

    def close(self):
        pass


def botocore_events(data: bytes) -> list[dict]:
    """What botocore's EventStream yields for a response body, as frames.json writes it."""
    out: list[dict] = []
    stream = EventStream(_Raw(data), OPERATION.output_shape.members["Body"], parsers.EventStreamJSONParser(),
                         OPERATION.name)
    try:
        for event in stream:
            out.append({"PayloadPart": {"Bytes_b64": base64.b64encode(event["PayloadPart"]["Bytes"]).decode()}})
    except EventStreamError as exc:
        out.append({"EventStreamError": {k: v for k, v in exc.response.items() if k != "ResponseMetadata"}})
    return out


@pytest.mark.parametrize("name", sorted(FRAMES))
def test_botocore_reads_the_samples_as_recorded(name):
    assert botocore_events((WIRE / name).read_bytes()) == FRAMES[name]


@pytest.mark.parametrize("name", sorted(FRAMES))
def test_the_fast_client_reads_the_same_parts_and_failure(name):
    parts: list[bytes] = []
    error = read_event_stream(io.BytesIO((WIRE / name).read_bytes()), lambda payload, now: parts.append(payload),
                              "http://127.0.0.1/endpoints/e/invocations-response-stream")
    expected = FRAMES[name]
    assert [base64.b64encode(p).decode() for p in parts] == [
        e["PayloadPart"]["Bytes_b64"] for e in expected if "PayloadPart" in e]
    failure = [e["EventStreamError"]["Error"] for e in expected if "EventStreamError" in e]
    if failure:
        assert error is not None and (error.code, error.message) == (failure[0]["Code"], failure[0]["Message"])
    else:
        assert error is None


@pytest.mark.parametrize("name", sorted(FRAMES))
def test_the_local_endpoint_encodes_the_same_bytes(name):
    raw = (WIRE / name).read_bytes()
    buffer = EventStreamBuffer()
    buffer.add_data(raw)
    written = b""
    for message in buffer:
        headers = message.headers
        if headers[":message-type"] == "event":
            written += es.encode_payload_part(message.payload)
        else:
            body = json.loads(message.payload)
            written += es.encode_exception(headers[":exception-type"], body["Message"], body.get("ErrorCode"))
            assert error_from_stream_message(headers, message.payload).code == headers[":exception-type"]
    assert written == raw


@pytest.mark.parametrize("case", ERRORS, ids=[c["name"] for c in ERRORS])
def test_error_bodies_parse_as_botocore_parses_them(case):
    response = {"status_code": case["status"], "headers": HeadersDict(case["headers"]), "body": case["body"].encode()}
    parser = parsers.create_parser("rest-json")
    parsed = parser.parse(response, OPERATION.output_shape)
    code = parsed["Error"]["Code"]
    shape = MODEL.shape_for_error_code(code)
    if shape is not None:  # botocore.endpoint.Endpoint._add_modeled_error_fields
        parsed.update(parser.parse(response, shape))
    parsed.pop("ResponseMetadata", None)
    assert parsed == case["botocore"]
    assert parse_error_response(case["status"], case["headers"], case["body"].encode()) == case["botocore"]
