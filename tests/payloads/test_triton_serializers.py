"""The `triton` / `triton-json` serializers against tritonclient, the independent encoder and decoder.

tritonclient (NVIDIA's own client, in the test extra) builds request bodies and reads answers with
its own code: equal inputs must give byte-equal binary bodies, and each side must read what the
other writes, for every Triton datatype. Refusals (a lossy cast, FP16/BF16 in JSON, a .npy without
a name) are one-line SerializationErrors before anything is sent.
"""

from __future__ import annotations

import locust  # noqa: F401  (gevent patching before tritonclient.http imports geventhttpclient)

import numpy as np
import pytest
import tritonclient.http as triton_http
from tritonclient.utils import np_to_triton_dtype

from sm_locust.errors import UsageError
from sm_locust.invocation import Invocation
from sm_locust.payloads import load_payloads
from sm_locust.payloads.options import PayloadSettings
from sm_locust.payloads.split import parts_of
from sm_locust.serializers import ResponseValidator, SerializationError, body_rows, create_serializer, kserve
from sm_locust.serializers.triton_format import triton_rows

BERT = {"input_ids": np.arange(4 * 512, dtype=np.int32).reshape(4, 512) % 30522,
        "attention_mask": np.ones((4, 512), dtype=np.int32)}


def client_body(arrays: dict, outputs=(), binary_inputs=True, binary_output=True):
    inputs = []
    for name, arr in arrays.items():
        item = triton_http.InferInput(name, list(arr.shape), np_to_triton_dtype(arr.dtype))
        item.set_data_from_numpy(arr, binary_data=binary_inputs)
        inputs.append(item)
    wanted = [triton_http.InferRequestedOutput(n, binary_data=binary_output) for n in outputs] or None
    return triton_http.InferenceServerClient.generate_request_body(inputs, outputs=wanted)


def client_answer(body: bytes, content_type: str) -> triton_http.InferResult:
    return triton_http.InferenceServerClient.parse_response_body(body, header_length=kserve.header_size(content_type))


def test_binary_bodies_equal_tritonclients_byte_for_byte():
    ser = create_serializer("triton", output_names="logits")
    body, ctype = ser.encode(BERT)
    expected, header = client_body(BERT, outputs=["logits"])
    assert body == expected
    assert ctype == f"application/vnd.sagemaker-triton.binary+json;json-header-size={header}"
    # no output named: every output in binary, as tritonclient asks (binary_data_output)
    assert create_serializer("triton").encode(BERT)[0] == client_body(BERT)[0]


def test_json_bodies_equal_tritonclients_for_integers():
    ser = create_serializer("triton-json", output_names="logits")
    body, ctype = ser.encode(BERT)
    expected, header = client_body(BERT, outputs=["logits"], binary_inputs=False, binary_output=False)
    assert (body, ctype, header) == (expected, "application/json", None)


ALL_TYPES = {
    "b": np.array([[True, False]]), "u8": np.array([[0, 255]], np.uint8), "u16": np.array([[1, 65535]], np.uint16),
    "u32": np.array([[7, 2**32 - 1]], np.uint32), "u64": np.array([[9, 2**64 - 1]], np.uint64),
    "i8": np.array([[-128, 127]], np.int8), "i16": np.array([[-32768, 32767]], np.int16),
    "i32": np.array([[-2**31, 2**31 - 1]], np.int32), "i64": np.array([[-2**63, 2**63 - 1]], np.int64),
    "f16": np.array([[0.5, -2.0]], np.float16), "f32": np.array([[1.5, np.nan]], np.float32),
    "f64": np.array([[np.pi, -1e300]], np.float64), "s": np.array([[b"hello", b"\x00\xff"]]),
}


def test_every_datatype_round_trips_through_tritonclient():
    body, ctype = create_serializer("triton").encode(ALL_TYPES)
    assert body == client_body(ALL_TYPES)[0]
    decoded = kserve.decode_request(body, ctype)
    assert [d["datatype"] for d in decoded.document["inputs"]] == [
        "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64",
        "BYTES"]
    for name, arr in ALL_TYPES.items():
        got = decoded.tensors[name]
        if arr.dtype.kind == "S":
            assert got.tolist() == [[b"hello", b"\x00\xff"]]
        else:
            np.testing.assert_array_equal(got, arr)
            assert got.dtype == arr.dtype


def test_bf16_is_the_upper_half_of_fp32_and_refused_when_it_would_round():
    ser = create_serializer("triton", input_datatypes="x=BF16")
    body, ctype = ser.encode({"x": np.array([[1.0, -2.5, 0.15625]], np.float32)})
    blob = body[kserve.header_size(ctype):]
    assert blob == bytes.fromhex("803f20c0203e")  # 0x3F80, 0xC020, 0x3E20 little-endian
    assert kserve.decode_request(body, ctype).tensors["x"].tolist() == [[1.0, -2.5, 0.15625]]
    with pytest.raises(SerializationError, match=r"cannot be sent as BF16 without changing them \(e.g. 0.1"):
        ser.encode({"x": np.array([[0.1]], np.float32)})
    with pytest.raises(SerializationError, match="BF16 cannot travel in JSON"):
        create_serializer("triton-json", input_datatypes="x=BF16").encode({"x": np.array([[1.0]], np.float32)})


def test_a_cast_that_changes_values_is_refused_one_that_keeps_them_is_made():
    ids = np.array([[101, 2**31 + 5]], np.int64)
    with pytest.raises(SerializationError) as err:
        create_serializer("triton", input_datatypes="input_ids=INT32").encode({"input_ids": ids})
    assert str(err.value) == ("payload: input 'input_ids': int64 values cannot be sent as INT32 without changing them "
                              "(e.g. 2147483653); save the array as int64 values that fit INT32, or give "
                              "--input-datatypes with a type that holds them")
    assert "\n" not in str(err.value)
    body, ctype = create_serializer("triton", input_datatypes="input_ids=INT32").encode(
        {"input_ids": np.array([[101, 102]], np.int64)})
    assert kserve.decode_request(body, ctype).tensors["input_ids"].dtype == np.int32
    for dtype, values in (("FP16", [0.1]), ("INT8", [300]), ("UINT8", [-1]), ("BOOL", [2]), ("INT32", [1.5])):
        with pytest.raises(SerializationError, match=f"cannot be sent as {dtype}"):
            create_serializer("triton", input_datatypes=f"x={dtype}").encode({"x": np.array([values])})


def test_fp16_is_refused_in_json_and_text_is_bytes():
    with pytest.raises(SerializationError, match="FP16 cannot travel in JSON"):
        create_serializer("triton-json").encode({"x": np.array([[0.5]], np.float16)})
    body, _ = create_serializer("triton-json").encode({"t": np.array([["héllo", "b"]])})
    assert body == '{"inputs":[{"name":"t","shape":[1,2],"datatype":"BYTES","data":["héllo","b"]}]}'.encode()


def test_names_renames_and_npy_needs_a_name():
    ser = create_serializer("triton", input_names="ids=input_ids")
    doc = kserve.decode_request(*ser.encode({"ids": BERT["input_ids"], "attention_mask": BERT["attention_mask"]}))
    assert [i["name"] for i in doc.document["inputs"]] == ["input_ids", "attention_mask"]
    with pytest.raises(SerializationError, match="give --input-names NAME"):
        create_serializer("triton").encode(BERT["input_ids"])
    one = create_serializer("triton", input_names="input_ids").encode(BERT["input_ids"])
    assert kserve.decode_request(*one).document["inputs"][0]["name"] == "input_ids"
    with pytest.raises(SerializationError, match="not an input; the inputs are input_ids, attention_mask"):
        create_serializer("triton", input_datatypes="token_type_ids=INT32").encode(BERT)
    with pytest.raises(SerializationError, match="'INT33' is not a Triton datatype; use one of: BOOL"):
        create_serializer("triton", input_datatypes="input_ids=INT33")


def test_answers_tritonclient_writes_decode_into_named_arrays():
    logits = np.array([[0.25, -0.5], [1.0, 2.0]], np.float32)
    for binary in (True, False):
        answer_tensors = [(kserve.Tensor("logits", kserve.DATATYPES["FP32"], logits), binary)]
        body, ctype = kserve.encode_answer("model", "1", answer_tensors)
        np.testing.assert_array_equal(client_answer(body, ctype).as_numpy("logits"), logits)  # tritonclient reads it
        for name in ("triton", "triton-json", "json"):
            got = create_serializer(name).deserialize(body, ctype)
            np.testing.assert_array_equal(got["logits"], logits)


def test_validation_checks_names_shape_and_rows_of_both_kinds():
    logits = kserve.Tensor("logits", kserve.DATATYPES["FP32"], np.zeros((4, 2), np.float32))
    invocation = Invocation(body=b"x", rows=4)
    for binary in (True, False):
        body, ctype = kserve.encode_answer("model", "1", [(logits, binary)])
        ok = ResponseValidator(create_serializer("triton"), expected_keys=["logits"], expected_shape=(None, 2))
        assert ok.check(body, ctype, invocation) is None
        assert "missing output 'probs'" in ResponseValidator(create_serializer("triton"),
                                                             expected_keys=["probs"]).check(body, ctype, invocation)
        assert "has 4 rows; the request sent 8" in ok.check(body, ctype, Invocation(body=b"x", rows=8))


def test_the_payload_options_reach_the_serializer_and_stay_with_it():
    ps = PayloadSettings(serializer="triton", input_datatypes="input_ids=INT32", output_names="logits",
                         binary_output="off")
    ser = ps.build_serializer()
    assert ser.output_names == ("logits",) and ser.binary_output is False
    assert create_serializer("triton-json").binary_output is False and create_serializer("triton").binary_output
    with pytest.raises(UsageError, match="--output-names applies to the triton / triton-json serializers"):
        PayloadSettings(serializer="json", output_names="logits").build_serializer()
    with pytest.raises(SerializationError, match="binary output must be on or off"):
        PayloadSettings(serializer="triton", binary_output="maybe").build_serializer()


def test_rows_of_a_body_read_as_bytes():
    body, ctype = create_serializer("triton").encode(BERT)
    assert triton_rows(body) == 4
    assert body_rows(body, ctype) == 4
    assert body_rows(create_serializer("triton-json").encode(BERT)[0], "application/json") == 4
    assert create_serializer("triton").content_type_of(body) == ctype  # deduced from the body alone


def test_batches_max_bodies_and_split_work_as_for_every_array_source(tmp_path):
    path = tmp_path / "bert.npz"
    np.savez(path, input_ids=np.arange(10 * 8).reshape(10, 8), attention_mask=np.ones((10, 8), np.int64))
    ser = create_serializer("triton", input_datatypes="input_ids=INT32,attention_mask=INT32")
    pool = load_payloads(path, serializer=ser, batch_size=4, max_bodies=3, split=2)
    assert len(pool.invocations) == 3
    for invocation in pool.invocations:
        assert invocation.rows == 4
        assert kserve.decode_request(invocation.body, invocation.content_type).tensors["input_ids"].shape == (4, 8)
        parts = parts_of(invocation)
        assert [p.rows for p in parts] == [2, 2]
        for part in parts:
            decoded = kserve.decode_request(part.body, part.content_type)
            assert [a.shape for a in decoded.tensors.values()] == [(2, 8), (2, 8)]
            assert part.content_type == kserve.binary_content_type(kserve.document_length(part.body))


def test_a_200_answer_holding_only_an_error_document_fails_validation():
    """Was: a Triton endpoint answering 200 {"error": ...} passed --validate-response on (read as JSON)."""
    from sm_locust.serializers.json_format import JsonSerializer
    from sm_locust.serializers.triton_format import TritonSerializer
    from sm_locust.serializers.validation import ResponseValidator

    for serializer in (TritonSerializer(), JsonSerializer()):
        for body in (b'{"error": "model is not ready"}', b'{"error": {"code": 3, "message": "bad input"}}'):
            error = ResponseValidator(serializer).validate(body, "application/json")
            assert error is not None and error.code == "InvalidResponse" and "error document" in error.message
        assert ResponseValidator(serializer).validate(b'{"prob": [0.5], "error": null}', "application/json") is None
        assert ResponseValidator(serializer).validate(b'{"prob": [0.5]}', "application/json") is None
