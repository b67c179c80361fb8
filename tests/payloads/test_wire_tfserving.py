"""TF-Serving conformance: the client and the local endpoint against the same byte-exact fixtures.

tests/fixtures/wire/tfserving/ holds PredictRequest / PredictResponse protobuf bytes assembled
field by field from tensorflow/serving's .proto field numbers, and the REST API's JSON shapes
(row `instances`, columnar `inputs`, `predictions`, `outputs`, `{"error"}`), written by its own
make.py (never with sm-locust's code; README.md there). The client's serializers must produce the
request bytes and read the answers; the endpoint must read the requests and produce the answers.
"""

from __future__ import annotations

import json
import runpy

import numpy as np
import pytest

from sm_locust.endpoint import codecs
from sm_locust.serializers import ResponseValidator, create_serializer, tfs_proto
from tests.conftest import ROOT

WIRE = ROOT / "tests" / "fixtures" / "wire" / "tfserving"
INDEX = json.loads((WIRE / "index.json").read_text())
IDS = np.array(INDEX["feat_ids"]["values"], dtype=np.int64)
VALS = np.array(INDEX["feat_vals"]["values"], dtype=np.float32)
PROBS = np.array(INDEX["prob"]["values"], dtype=np.float32)
RANKING = {"feat_ids": IDS, "feat_vals": VALS}


def test_the_client_sends_the_fixture_bytes():
    assert create_serializer("protobuf").serialize(RANKING) == (WIRE / "predict_request.pb").read_bytes()
    assert create_serializer("json").serialize(RANKING) == (WIRE / "request_inputs.json").read_bytes()
    assert create_serializer("json", layout="instances").serialize(RANKING) == \
        (WIRE / "request_instances.json").read_bytes()


@pytest.mark.parametrize("name, content_type", [
    ("predict_request.pb", "application/x-protobuf"), ("predict_request_typed.pb", "application/x-protobuf"),
    ("request_inputs.json", "application/json"), ("request_instances.json", "application/json"),
])
def test_the_endpoint_reads_every_request_fixture(name, content_type):
    ids, vals = codecs.decode_request((WIRE / name).read_bytes(), content_type)
    np.testing.assert_array_equal(ids, IDS)
    np.testing.assert_array_equal(vals, VALS)


def test_request_fixtures_carry_the_model_spec():
    for name in ("predict_request.pb", "predict_request_typed.pb"):
        req = tfs_proto.decode_predict_request((WIRE / name).read_bytes())
        assert (req.model_name, req.signature_name, req.version) == (INDEX["model_name"], INDEX["signature_name"], None)
        assert req.tensors["feat_ids"].dtype == np.int64 and req.tensors["feat_vals"].dtype == np.float32


def test_the_endpoint_writes_the_answer_fixtures():
    assert codecs.encode_response(PROBS, "application/x-protobuf") == (
        (WIRE / "predict_response.pb").read_bytes(), "application/x-protobuf")
    assert codecs.encode_response(PROBS, "application/json") == (
        (WIRE / "response_predictions.json").read_bytes(), "application/json")


def test_the_client_reads_the_answer_fixtures():
    resp = create_serializer("protobuf").deserialize((WIRE / "predict_response.pb").read_bytes(),
                                                     "application/x-protobuf")
    np.testing.assert_array_equal(resp["prob"], PROBS)
    np.testing.assert_array_equal(create_serializer("json").deserialize(
        (WIRE / "response_predictions.json").read_bytes(), "application/json"), PROBS)
    outputs = create_serializer("json").deserialize((WIRE / "response_outputs.json").read_bytes(), "application/json")
    np.testing.assert_array_equal(outputs["prob"], PROBS)


def test_an_error_document_is_an_invalid_answer():
    body = (WIRE / "error.json").read_bytes()
    assert json.loads(body) == {"error": INDEX["error"]}
    why = ResponseValidator(create_serializer("json"), expected_keys=["prob"]).check(body, "application/json")
    assert why == f"the answer is an error document: {INDEX['error']}"  # named as one, before the missing output


def test_the_fixtures_are_what_make_py_writes(tmp_path):
    (tmp_path / "make.py").write_text((WIRE / "make.py").read_text())
    runpy.run_path(str(tmp_path / "make.py"), run_name="__main__")
    for path in tmp_path.iterdir():
        if path.name != "make.py":
            assert path.read_bytes() == (WIRE / path.name).read_bytes(), path.name
