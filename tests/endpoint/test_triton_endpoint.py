"""`sm-locust serve --protocol triton`: the model description, the reader's choices the fixtures do not
pin (binary or JSON answers per output, the request id, raw bodies), batching invariance, and the
flags. The wire fixtures (tests/payloads/test_wire_triton.py) pin the bytes and Triton's errors."""

from __future__ import annotations

import numpy as np
import pytest

from sm_locust.cli import build_parser
from sm_locust.cli.serve import config_from_args
from sm_locust.endpoint import triton
from sm_locust.endpoint.batching import Batcher, sleeping_runner
from sm_locust.endpoint.codecs import CodecError
from sm_locust.endpoint.faults import EndpointConfig
from sm_locust.endpoint.server import LocalEndpoint
from sm_locust.errors import UsageError
from sm_locust.serializers import create_serializer, kserve

BERT = triton.TritonModel.parse(triton.DEFAULT_INPUTS, triton.DEFAULT_OUTPUTS, 8)


def bert_rows(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"input_ids": rng.integers(0, 30522, (n, 512)).astype(np.int32),
            "attention_mask": np.ones((n, 512), np.int32)}


def test_model_description_full_shapes_with_the_batch_dimension_first():
    assert [(s.name, s.datatype.name, s.dims) for s in BERT.inputs] == [("input_ids", "INT32", (512,)),
                                                                         ("attention_mask", "INT32", (512,))]
    assert [(s.name, s.dims) for s in BERT.outputs] == [("logits", (2,))]
    assert BERT.describe() == ("Triton protocol: model 'model', inputs input_ids INT32 [-1,512], attention_mask INT32 "
                               "[-1,512]; outputs logits FP32 [-1,2]; max_batch_size 8")
    unbatched = triton.TritonModel.parse("x:FP32:-1,3", "y:FP32:3;z:FP32:-1,2", 0)
    assert unbatched.inputs[0].dims == (-1, 3) and unbatched.outputs[0].dims == (3,)
    request = triton.parse_request(unbatched, *create_serializer("triton").encode({"x": np.ones((4, 3), np.float32)}))
    assert (request.batch_size, request.rows) == (0, 4)  # no batch dimension: the free first dim gives the rows
    out = triton.predict_batch(unbatched, [request])[0]
    assert out["y"].shape == (3,) and out["z"].shape == (4, 2)


@pytest.mark.parametrize("inputs, outputs, batch, message", [
    ("input_ids:INT33:-1,512", "logits:FP32:-1,2", 8, "'INT33' is not a Triton datatype"),
    ("input_ids:INT32:512", "logits:FP32:-1,2", 8, "the first dim is the batch dimension, written -1"),
    ("input_ids:INT32", "logits:FP32:-1,2", 8, "is not NAME:DATATYPE:DIMS"),
    ("a:INT32:-1,4;a:INT32:-1,4", "logits:FP32:-1,2", 8, "names 'a' twice"),
    ("a:INT32:-1,4", "logits:FP32:-1,-1", 8, "needs every output dim sized but the batch's"),
    ("a:INT32:-1,x", "logits:FP32:-1,2", 8, "are not whole numbers"),
])
def test_a_model_that_cannot_be_is_a_one_line_error(inputs, outputs, batch, message):
    with pytest.raises(ValueError, match=message):
        triton.TritonModel.parse(inputs, outputs, batch)


def test_serve_flags_reach_the_config_and_the_child_command():
    args = build_parser("serve").parse_args(["serve", "--protocol", "triton", "--model-inputs", "x:FP32:-1,3",
                                             "--model-outputs", "y:INT64:-1,1", "--max-batch-size", "4"])
    config = config_from_args(args)
    assert (config.protocol, config.model_inputs, config.model_outputs) == ("triton", "x:FP32:-1,3", "y:INT64:-1,1")
    command = LocalEndpoint(config).command()
    assert command[command.index("--protocol") + 1] == "triton"
    assert command[command.index("--model-inputs") + 1] == "x:FP32:-1,3"
    for argv, message in ((["serve", "--model-inputs", "x:FP32:-1,3"], "describes a Triton model; add --protocol"),
                          (["serve", "--protocol", "triton", "--llm"], "cannot be combined with --llm"),
                          (["serve", "--protocol", "triton", "--max-batch-size", "4", "--model-inputs", "x:FP32:3"],
                           "first dim is the batch dimension")):
        with pytest.raises(UsageError, match=message):
            config_from_args(build_parser("serve").parse_args(argv))


def test_outputs_answer_binary_or_json_as_asked_and_the_id_comes_back():
    model = triton.TritonModel.parse("x:FP32:-1,2", "a:FP32:-1,1;b:INT32:-1,1", 4)
    x = {"x": np.array([[1.0, 2.0]], np.float32)}
    # no outputs named, binary_data_output on: every output in binary
    request = triton.parse_request(model, *create_serializer("triton").encode(x))
    assert request.outputs == {"a": True, "b": True}
    # outputs named: only those, each as its own binary_data says
    body, ctype = create_serializer("triton-json", output_names="b", binary_output="on").encode(x)
    request = triton.parse_request(model, body, ctype)
    assert request.outputs == {"b": True}
    # nothing said: JSON (Triton's default); the request id is echoed
    doc = b'{"id":"req-1","inputs":[{"name":"x","shape":[1,2],"datatype":"FP32","data":[1,2.5]}]}'
    request = triton.parse_request(model, doc, "application/json")
    assert request.outputs == {"a": False, "b": False} and request.request_id == "req-1"
    answer, answer_type = triton.encode(model, request, triton.predict_batch(model, [request])[0])
    assert answer_type == "application/json" and answer.startswith(b'{"id":"req-1","model_name":"model"')
    with pytest.raises(CodecError) as err:
        triton.parse_request(model, doc.replace(b'"id":"req-1"', b'"id":7'), "application/json")
    assert (err.value.status, str(err.value)) == (500, '{"error":"Unable to parse \'id\': attempt to access JSON '
                                                        'non-string as string"}')


def test_an_fp16_output_cannot_answer_in_json():
    model = triton.TritonModel.parse("x:FP32:-1,2", "h:FP16:-1,1", 4)
    request = triton.parse_request(model, b'{"inputs":[{"name":"x","shape":[1,2],"datatype":"FP32","data":[1,2]}]}',
                                   "application/json")
    with pytest.raises(CodecError) as err:
        triton.encode(model, request, triton.predict_batch(model, [request])[0])
    assert (err.value.status, str(err.value)) == (400, '{"error":"sending FP16 data via JSON is not supported. Please '
                                                        'use the binary data format for output"}')


def test_a_raw_body_is_the_one_inputs_data_with_its_shape_deduced():
    model = triton.TritonModel.parse("x:FP32:-1,-1", "y:FP32:-1,1", 4)
    body = np.arange(6, dtype="<f4").tobytes()
    request = triton.parse_request(model, body, kserve.BINARY_PREFIX + "0")
    assert request.inputs["x"].shape == (1, 6) and request.outputs == {"y": True}
    with pytest.raises(CodecError, match="Raw request must only have 1 input"):
        triton.parse_request(BERT, body, kserve.BINARY_PREFIX + "0")


def test_a_row_gets_the_same_answer_alone_or_batched():
    ser = create_serializer("triton")
    requests = [triton.parse_request(BERT, *ser.encode(bert_rows(n, seed=n))) for n in (1, 3, 2)]
    together = triton.predict_batch(BERT, requests)
    for request, got in zip(requests, together, strict=True):
        alone = triton.predict_batch(BERT, [request])[0]
        np.testing.assert_array_equal(got["logits"], alone["logits"])
        assert got["logits"].shape == (request.batch_size, 2) and got["logits"].dtype == np.float32


def test_the_batcher_fills_batches_by_rows():
    sizes: list[int] = []
    batcher = Batcher(8, 0.0, sleeping_runner(BERT, 0, 0.2, predict=triton.predict_batch, size=triton.rows_of),
                      on_batch=sizes.append)
    requests = [triton.parse_request(BERT, *create_serializer("triton").encode(bert_rows(3))) for _ in range(3)]
    assert batcher.submit(requests[0], size=3)["logits"].shape == (3, 2)
    assert sizes == [1]


def test_endpoint_config_validates_the_protocol():
    with pytest.raises(ValueError, match="--protocol 'grpc' is unknown; choose one of: ranking, triton"):
        EndpointConfig(protocol="grpc").validate()
    EndpointConfig(protocol="triton", max_batch_size=8).validate()
