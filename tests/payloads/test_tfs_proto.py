"""PredictRequest bytes must be what tensorflow_serving's predict_pb2 would produce.

The check does not trust our own descriptors: a small protobuf wire-format walker written here
(varints, length-delimited fields, packed repeated scalars) reads the bytes back using the field
numbers from tensorflow/core/framework/tensor.proto and tensorflow_serving/apis/predict.proto.
"""

from __future__ import annotations

import struct
import subprocess
import sys

import numpy as np
import pytest

from sm_locust.serializers import SerializationError, tfs_proto

# -- an independent protobuf wire-format reader ------------------------------------------------


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def fields(buf: bytes) -> list[tuple[int, int, object]]:
    """[(field number, wire type, value)]: value is an int (varint/fixed) or bytes (length-delimited)."""
    out, pos = [], 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos : pos + 8], pos + 8
        elif wire == 2:
            length, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + length], pos + length
        elif wire == 5:
            value, pos = buf[pos : pos + 4], pos + 4
        else:
            raise AssertionError(f"unexpected wire type {wire}")
        out.append((number, wire, value))
    return out


def one(buf: bytes, number: int):
    values = [v for n, _, v in fields(buf) if n == number]
    assert len(values) == 1, (number, values)
    return values[0]


def packed_varints(buf: bytes) -> list[int]:
    out, pos = [], 0
    while pos < len(buf):
        v, pos = _varint(buf, pos)
        out.append(v)
    return out


def tensor(buf: bytes) -> dict:
    """dtype, shape and the raw value fields of a TensorProto (field numbers from tensor.proto)."""
    shape_msg = one(buf, 2)
    dims = [one(dim, 1) for n, _, dim in fields(shape_msg) if n == 2]  # TensorShapeProto.dim=2, Dim.size=1
    values: dict[int, list] = {}
    for n, _, v in fields(buf):
        if n not in (1, 2):
            values.setdefault(n, []).append(v)
    # packed scalars arrive as one length-delimited value; strings (8) as one value each
    return {"dtype": one(buf, 1), "shape": dims, "fields": {n: v if n == 8 else v[0] for n, v in values.items()}}


def request(buf: bytes) -> dict:
    """PredictRequest: model_spec=1 (name=1, version=2, signature_name=3), inputs=2 (map), output_filter=3."""
    spec = one(buf, 1)
    inputs = {}
    for n, _, entry in fields(buf):
        if n == 2:
            inputs[one(entry, 1).decode()] = tensor(one(entry, 2))
    version = [one(v, 1) for n, _, v in fields(spec) if n == 2]
    return {
        "name": one(spec, 1).decode(),
        "signature_name": one(spec, 3).decode(),
        "version": version[0] if version else None,
        "inputs": inputs,
        "output_filter": [v.decode() for n, _, v in fields(buf) if n == 3],
    }


def seed_request():
    """The seed article's DeepFM request: one sample copied to 500 rows."""
    t = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15, 555, 1078, 17797, 26190, 26341, 28570, 35361, 35613, 35984,
         48424, 51364, 64053, 65964, 66206, 71628, 84088, 84119, 86889, 88280, 88283, 100288, 100300, 102447, 109932,
         111823]  # fmt: skip
    f = [0.05, 0.006633, 0.05, 0, 0.021594, 0.008, 0.15, 0.04, 0.362, 0.1, 0.2, 0, 0.04] + [1] * 26
    return np.array([t] * 500, dtype="int64"), np.array([f] * 500, dtype="float32")


# -- tests --------------------------------------------------------------------------------------


def test_seed_request_with_tensor_content_is_read_back_by_an_independent_walker():
    ids, vals = seed_request()
    body = tfs_proto.encode_predict_request({"feat_ids": ids, "feat_vals": vals}, model_name="model")

    req = request(body)

    assert req["name"] == "model" and req["signature_name"] == "serving_default" and req["version"] is None
    got_ids, got_vals = req["inputs"]["feat_ids"], req["inputs"]["feat_vals"]
    assert got_ids["dtype"] == 9 and got_ids["shape"] == [500, 39]  # DT_INT64
    assert got_vals["dtype"] == 1 and got_vals["shape"] == [500, 39]  # DT_FLOAT
    assert np.array_equal(np.frombuffer(got_ids["fields"][4], "<i8").reshape(500, 39), ids)  # tensor_content=4
    assert np.array_equal(np.frombuffer(got_vals["fields"][4], "<f4").reshape(500, 39), vals)


def test_typed_values_use_the_tensorflow_field_numbers():
    ids, vals = seed_request()
    body = tfs_proto.encode_predict_request(
        {"feat_ids": ids[:2], "feat_vals": vals[:2], "small": np.array([7, -3], np.int32),
         "tag": np.array(["a", "bé"])},
        use_tensor_content=False,
        version=12,
        output_filter=["prob"],
    )

    req = request(body)

    assert req["version"] == 12 and req["output_filter"] == ["prob"]
    fv = req["inputs"]["feat_vals"]["fields"]
    assert 4 not in fv and np.array_equal(np.frombuffer(fv[5], "<f4").reshape(2, 39), vals[:2])  # float_val=5, packed
    iv = req["inputs"]["feat_ids"]["fields"]
    assert packed_varints(iv[10]) == ids[:2].ravel().tolist()  # int64_val=10
    small = req["inputs"]["small"]
    assert small["dtype"] == 3 and [struct.unpack("<i", struct.pack("<I", v & 0xFFFFFFFF))[0]
                                    for v in packed_varints(small["fields"][7])] == [7, -3]
    tag = req["inputs"]["tag"]
    assert tag["dtype"] == 7 and tag["shape"] == [2] and tag["fields"][8] == [b"a", "bé".encode()]  # string_val=8


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8", "int8", "int16", "uint16",
                                   "float16", "bool", "uint32", "uint64"])
@pytest.mark.parametrize("use_tensor_content", [True, False])
def test_every_supported_dtype_round_trips(dtype, use_tensor_content):
    arr = (np.arange(12).reshape(3, 4) % 5).astype(dtype)
    body = tfs_proto.encode_predict_response({"out": arr}, use_tensor_content=use_tensor_content)
    back = tfs_proto.decode_predict_response(body).tensors["out"]
    assert back.dtype == arr.dtype and back.shape == (3, 4) and np.array_equal(back, arr)


def test_model_spec_and_output_filter_are_decoded():
    body = tfs_proto.encode_predict_request({"x": np.zeros((1, 2), np.float32)}, model_name="deepfm",
                                            signature_name="pred", version=3, output_filter=["prob"])
    decoded = tfs_proto.decode_predict_request(body)
    assert (decoded.model_name, decoded.signature_name, decoded.version, decoded.output_filter) == ("deepfm", "pred", 3,
                                                                                                    ["prob"])


def test_a_single_typed_value_fills_the_shape_as_tensorflow_does():
    t = tfs_proto.messages().TensorProto(dtype=tfs_proto.DT_FLOAT, float_val=[0.5])
    t.tensor_shape.dim.add(size=2)
    t.tensor_shape.dim.add(size=3)
    assert np.array_equal(tfs_proto.tensor_to_array(t), np.full((2, 3), 0.5, np.float32))


def test_bad_bytes_and_inconsistent_tensors_are_clear_errors():
    with pytest.raises(SerializationError, match="PredictRequest"):
        tfs_proto.decode_predict_request(b'{"instances": [1, 2]}')
    t = tfs_proto.make_tensor_proto(np.zeros((2, 3), np.float32))
    t.tensor_shape.dim[0].size = 5
    with pytest.raises(SerializationError, match="tensor_content holds 24 bytes"):
        tfs_proto.tensor_to_array(t)
    with pytest.raises(SerializationError, match="no TF-Serving tensor type"):
        tfs_proto.make_tensor_proto(np.zeros(2, np.complex64))


@pytest.mark.e2e
def test_importing_builds_nothing_and_tensorflow_is_not_needed():
    code = (
        "import sys, sm_locust.serializers.tfs_proto as t; "
        "assert t.messages.cache_info().currsize == 0; "
        "assert 'tensorflow' not in sys.modules; t.messages(); print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr
