"""The local endpoint's codecs: every request format decodes to the same ranking rows,
every response format reads back to the same probabilities, bad bodies become CodecError."""

from __future__ import annotations

import io

import numpy as np
import orjson
import pytest

from sm_locust.endpoint import codecs
from sm_locust.endpoint.codecs import CodecError, decode_request, encode_response
from sm_locust.endpoint.model import RankingModel, sample_rows
from sm_locust.serializers import create_serializer, tfs_proto

IDS, VALS = sample_rows(5)
REQUEST = {"feat_ids": IDS, "feat_vals": VALS}


def _same(decoded):
    ids, vals = decoded
    assert ids.dtype == np.int64 and vals.dtype == np.float32
    assert np.array_equal(ids, IDS) and np.array_equal(vals, VALS)


@pytest.mark.parametrize(
    "serializer,options,content_type",
    [
        ("json", {}, "application/json"),
        ("json", {"layout": "instances"}, "application/json; charset=utf-8"),
        ("protobuf", {}, "application/x-protobuf"),
        ("protobuf", {"use_tensor_content": False}, "X-protobuf"),  # the seed's content type
        ("npy", {}, "application/x-npy"),
        ("numpy-raw", {}, "application/octet-stream"),
        ("csv", {"header": True}, "text/csv"),
    ],
)
def test_every_request_format_decodes_to_the_same_rows(serializer, options, content_type):
    body = create_serializer(serializer, **options).serialize(REQUEST)
    _same(decode_request(body, content_type))


def test_packed_rows_also_work_in_json_and_protobuf():
    packed = create_serializer("npy").deserialize(create_serializer("npy").serialize(REQUEST))
    _same(decode_request(orjson.dumps({"instances": packed.tolist()}), "application/json"))
    _same(decode_request(tfs_proto.encode_predict_request({"inputs": packed}), "application/x-protobuf"))


def test_raw_buffers_take_dtype_and_shape_from_custom_attributes():
    packed64 = create_serializer("numpy-raw", dtype="float64").serialize(REQUEST)
    _same(decode_request(packed64, "application/octet-stream", "trace=abc;shape=5,78;dtype=float64"))
    with pytest.raises(CodecError, match=r"holds 390 values, which do not fit shape \[4,78\]"):
        decode_request(packed64, "application/octet-stream", "shape=4,78;dtype=float64")
    with pytest.raises(CodecError, match=r"\[N, 78\].*got \[780\]"):
        decode_request(packed64, "application/octet-stream", "shape=-1;dtype=float32")
    with pytest.raises(CodecError, match="dtype='complex64' is not supported"):
        decode_request(packed64, "application/octet-stream", "dtype=complex64")
    with pytest.raises(CodecError, match="not a whole number of float32 values"):
        decode_request(b"\x00" * 7, "application/octet-stream")


@pytest.mark.parametrize(
    "body,content_type,why",
    [
        (b"{not json", "application/json", "not valid JSON"),
        (b'{"rows": []}', "application/json", 'needs "instances"'),
        (b"\x93NUMPY garbage", "application/x-npy", "not a readable .npy"),
        (b"1,2,3\n", "text/csv", r"\[N, 78\]"),
        (b"a,b\nx,y\n", "text/csv", "not numeric CSV"),
        (b'{"instances": []}', "application/x-protobuf", "PredictRequest"),
        (b"\xff\xd8", "image/jpeg", "unsupported Content-Type 'image/jpeg'; send one of: application/json"),
    ],
)
def test_bad_bodies_become_codec_errors(body, content_type, why):
    with pytest.raises(CodecError, match=why):
        decode_request(body, content_type)


def test_protobuf_with_other_inputs_names_what_it_found():
    body = tfs_proto.encode_predict_request({"a": np.zeros((1, 39)), "b": np.zeros((1, 39))})
    with pytest.raises(CodecError, match=r"inputs \['a', 'b'\] do not match the ranking model"):
        decode_request(body, "application/x-protobuf")


def test_pickled_npy_is_refused():
    buf = io.BytesIO()
    np.save(buf, np.array([object()], dtype=object), allow_pickle=True)
    with pytest.raises(CodecError, match="refused"):
        decode_request(buf.getvalue(), "application/x-npy")


@pytest.mark.parametrize(
    "accept,content_type",
    [
        (None, "application/json"),
        ("*/*", "application/json"),
        ("application/json", "application/json"),
        ("application/x-npy", "application/x-npy"),
        ("application/octet-stream", "application/octet-stream"),
        ("text/csv", "text/csv"),
        ("application/x-protobuf", "application/x-protobuf"),
    ],
)
def test_every_response_format_reads_back_to_the_probabilities(accept, content_type):
    probs = RankingModel(vocab_size=1000).predict(IDS, VALS)
    body, ctype = encode_response(probs, accept)
    assert ctype == content_type
    decoded = create_serializer("json").deserialize(body, ctype)
    if isinstance(decoded, dict):
        decoded = decoded[codecs.OUTPUT_NAME]
    assert decoded.shape == (5,) and np.allclose(decoded, probs, rtol=1e-6)


def test_unknown_accept_is_a_codec_error():
    with pytest.raises(CodecError, match="unsupported Accept 'image/png'; ask for one of"):
        encode_response(np.zeros(2, np.float32), "image/png")


def test_json_lines_requests_carry_one_row_per_line():
    rows = b"".join(orjson.dumps({"feat_ids": i.tolist(), "feat_vals": v.tolist()}) + b"\n"
                    for i, v in zip(IDS, VALS, strict=True))
    _same(decode_request(rows, "application/jsonlines"))
    packed = create_serializer("npy").deserialize(create_serializer("npy").serialize(REQUEST))
    _same(decode_request(b"\n".join(orjson.dumps(r) for r in packed.tolist()), "application/jsonlines"))
    one_line = create_serializer("json").serialize(REQUEST)  # a one-line body is a JSON document
    _same(decode_request(one_line + b"\n", "application/jsonlines"))
    with pytest.raises(CodecError, match="line 2 of the JSON Lines body is not JSON"):
        decode_request(rows.splitlines()[0] + b"\n{oops\n", "application/jsonlines")
