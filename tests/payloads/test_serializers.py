"""Serializers: every format round-trips the ranking request, typos and misfits say what to do."""

from __future__ import annotations

import io

import numpy as np
import orjson
import pytest

from sm_locust.endpoint.model import sample_rows
from sm_locust.errors import UnknownNameError, UsageError
from sm_locust.invocation import Invocation
from sm_locust.serializers import (
    SERIALIZERS,
    ResponseValidator,
    SerializationError,
    create_serializer,
    ranking,
    tfs_proto,
)
from sm_locust.serializers.content_types import FORMATS, base_content_type, format_of
from sm_locust.serializers.ranking import NUM_FIELDS
from sm_locust.serializers.rows import body_rows, split_body


@pytest.fixture
def ranking_request():
    ids, vals = sample_rows(4)
    return {"feat_ids": ids, "feat_vals": vals}


def test_registry_names_and_aliases():
    assert SERIALIZERS.names() == ["csv", "json", "npy", "numpy-raw", "protobuf", "raw", "triton", "triton-json"]
    assert create_serializer("tfs-protobuf").name == "protobuf"
    assert create_serializer("protobuf-string").name == "protobuf"
    assert create_serializer("numpy-string").name == "numpy-raw"
    assert [create_serializer(a).name for a in ("triton-binary", "kserve-binary")] == ["triton", "triton"]
    assert [create_serializer(a).name for a in ("kserve-v2", "kserve-json")] == ["triton-json", "triton-json"]


def test_unknown_serializer_lists_the_valid_names():
    with pytest.raises(UnknownNameError) as err:
        create_serializer("protobuff")
    assert str(err.value) == ("unknown serializer 'protobuff'; choose one of: csv, json, npy, numpy-raw, protobuf, "
                              "raw, triton, triton-json")
    assert err.value.exit_code == 2


def test_unknown_option_lists_the_options():
    with pytest.raises(UsageError,
                       match="serializer 'numpy-raw' does not take option 'dtyp'; "
                             "it takes: dtype, shape, content_type"):
        create_serializer("numpy-string", dtyp="float32")


# -- requests: the ranking dict in every format -------------------------------------------------


def test_json_sends_columns_by_default_and_rows_on_request(ranking_request):
    doc = orjson.loads(create_serializer("json").serialize(ranking_request))
    assert np.array_equal(doc["inputs"]["feat_ids"], ranking_request["feat_ids"])
    assert np.allclose(doc["inputs"]["feat_vals"], ranking_request["feat_vals"])
    rows = orjson.loads(create_serializer("json", layout="instances").serialize(ranking_request))["instances"]
    assert len(rows) == 4 and rows[2]["feat_ids"] == ranking_request["feat_ids"][2].tolist()
    assert np.float32(rows[0]["feat_vals"][0]) == ranking_request["feat_vals"][0, 0]  # float32 written exactly


def test_json_handles_arrays_and_ready_requests():
    s = create_serializer("json")
    assert orjson.loads(s.serialize(np.arange(3))) == {"instances": [0, 1, 2]}
    assert orjson.loads(s.serialize({"instances": [np.float32(0.5)], "signature_name": "x"})) == {"instances": [0.5],
                                                                                                  "signature_name": "x"}
    assert s.serialize(b'{"already": "encoded"}') == b'{"already": "encoded"}'


def test_protobuf_request_carries_model_spec_and_typed_tensors(ranking_request):
    s = create_serializer("protobuf", model_name="deepfm", signature_name="serving_default", content_type="X-protobuf")
    assert s.content_type == "X-protobuf"  # the seed's inference.py checks this exact string
    decoded = tfs_proto.decode_predict_request(s.serialize(ranking_request))
    assert decoded.model_name == "deepfm"
    assert decoded.tensors["feat_ids"].dtype == np.int64 and decoded.tensors["feat_vals"].dtype == np.float32
    assert np.array_equal(decoded.tensors["feat_ids"], ranking_request["feat_ids"])
    assert np.array_equal(decoded.tensors["feat_vals"], ranking_request["feat_vals"])


def test_protobuf_renames_inputs_and_names_a_single_array():
    s = create_serializer("protobuf", input_names="feat_ids=ids,feat_vals=vals", input_name="x")
    ids, vals = sample_rows(2)
    assert sorted(tfs_proto.decode_predict_request(s.serialize({"feat_ids": ids,
                                                                "feat_vals": vals})).tensors) == ["ids", "vals"]
    single = tfs_proto.decode_predict_request(s.serialize([[0.5, 1.5]])).tensors["x"]
    assert single.dtype == np.float32 and single.tolist() == [[0.5, 1.5]]  # Python floats -> DT_FLOAT, as TF does


@pytest.mark.parametrize("name,options",
                         [("npy", {}), ("numpy-raw", {"shape": "N,78"}), ("csv", {}), ("csv", {"header": True})])
def test_single_array_formats_carry_the_packed_78_columns(name, options, ranking_request):
    s = create_serializer(name, **options)
    packed = s.deserialize(s.serialize(ranking_request))
    assert packed.shape == (4, 2 * NUM_FIELDS)
    ids, vals = ranking.unpack(packed)
    assert np.array_equal(ids, ranking_request["feat_ids"]) and np.array_equal(vals, ranking_request["feat_vals"])


def test_numpy_raw_describes_itself_in_custom_attributes(ranking_request):
    s = create_serializer("numpy-raw", dtype="float64")
    body = s.serialize(ranking_request)
    assert len(body) == 4 * 78 * 8
    assert s.custom_attributes(ranking_request) == "shape=4,78;dtype=float64"


def test_csv_header_names_the_columns(ranking_request):
    text = create_serializer("csv", header="on").serialize(ranking_request).decode()
    header, first = text.splitlines()[:2]
    assert header.startswith("feat_ids_0,feat_ids_1") and header.endswith("feat_vals_38")
    assert first.split(",")[0] == str(ranking_request["feat_ids"][0, 0])


def test_raw_sends_bytes_text_and_buffers_as_they_are():
    s = create_serializer("raw", content_type="image/png")
    assert s.content_type == "image/png"
    assert s.serialize(b"\x89PNG") == b"\x89PNG" and s.serialize("héllo") == "héllo".encode()
    assert s.serialize(np.array([1, 2], "<i2")) == b"\x01\x00\x02\x00"
    assert s.deserialize(b"anything") == b"anything"
    with pytest.raises(SerializationError, match="not a dict"):
        s.serialize({"a": 1})


# -- misfits ------------------------------------------------------------------------------------


def test_wrong_feature_count_is_refused_by_every_format():
    bad = {"feat_ids": np.zeros((2, 38), np.int64), "feat_vals": np.zeros((2, 38), np.float32)}
    for name in SERIALIZERS.names():
        if name in ("raw", "triton", "triton-json"):  # bytes as given; KServe v2 carries any named tensors
            continue
        with pytest.raises(SerializationError, match=r"must both be \[N, 39\].*got \[2, 38\]"):
            create_serializer(name).serialize(bad)


def test_ids_too_large_for_float32_are_refused_in_packed_formats():
    ids, vals = sample_rows(1)
    ids[0, 0] = 2**24 + 1
    with pytest.raises(SerializationError, match="cannot be carried exactly in float32.*use dtype float64"):
        create_serializer("npy").serialize({"feat_ids": ids, "feat_vals": vals})
    wide = create_serializer("npy", dtype="float64")
    back = wide.deserialize(wide.serialize({"feat_ids": ids, "feat_vals": vals}))
    assert back[0, 0] == 2**24 + 1


def test_fractional_ids_and_lossy_casts_are_refused():
    ids, vals = sample_rows(1)
    with pytest.raises(SerializationError, match="whole numbers; got 1.5 at row 0, column 0"):
        ranking.ranking_arrays({"feat_ids": np.where(np.arange(39) == 0, 1.5, 1.0), "feat_vals": vals[0]})
    with pytest.raises(SerializationError, match="cannot send float64 values as int32"):
        create_serializer("numpy-raw", dtype="int32").serialize(np.array([0.5]))
    with pytest.raises(SerializationError, match="do not fit shape"):
        create_serializer("numpy-raw", shape="N,78").serialize(np.zeros((2, 40), np.float32))
    with pytest.raises(SerializationError, match="carries one array"):
        create_serializer("npy").serialize({"a": [1], "b": [2]})


# -- responses ----------------------------------------------------------------------------------


def test_json_responses_become_arrays():
    s = create_serializer("json")
    assert s.deserialize(b'{"predictions": [0.1, 0.2]}').tolist() == [0.1, 0.2]
    prob = s.deserialize(b'{"prob": [[0.1], [0.2]]}')  # the seed's inference.py answer
    assert prob["prob"].shape == (2, 1)
    assert s.deserialize(b'{"outputs": {"a": [1, 2]}}')["a"].tolist() == [1, 2]


def test_npy_and_raw_responses_become_arrays():
    probs = np.array([0.25, 0.75], np.float32)
    buf = io.BytesIO()
    np.save(buf, probs)
    assert np.array_equal(create_serializer("npy").deserialize(buf.getvalue()), probs)
    assert np.array_equal(create_serializer("numpy-raw").deserialize(probs.tobytes()), probs)
    with pytest.raises(SerializationError, match="not a whole number of float32 values"):
        create_serializer("numpy-raw").deserialize(b"\x00" * 6)


def test_the_response_content_type_picks_the_decoder():
    protobuf = create_serializer("protobuf")
    assert protobuf.deserialize(b'{"predictions": [1]}', "application/json; charset=utf-8").tolist() == [1]
    resp = tfs_proto.encode_predict_response({"prob": np.array([0.5], np.float32)})
    assert protobuf.deserialize(resp, "application/x-protobuf")["prob"].tolist() == [0.5]
    assert create_serializer("json").deserialize(np.float32([0.5]).tobytes(),
                                                 "application/octet-stream").tolist() == [0.5]


def test_pickled_npy_is_refused_never_loaded():
    buf = io.BytesIO()
    np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(SerializationError, match="refused: this .npy holds Python objects") as err:
        create_serializer("npy").deserialize(buf.getvalue())
    assert isinstance(err.value, UsageError)
    with pytest.raises(SerializationError, match="not a .npy array"):
        create_serializer("npy").deserialize(b"\x80\x04K\x01.")  # a bare pickle stream


# -- response validation ------------------------------------------------------------------------


def test_validator_reports_invalid_responses_by_name():
    v = ResponseValidator()
    sent = Invocation(body=b"{}", rows=3)
    assert v.validate(b'{"predictions": [0.1, 0.2, 0.3]}', "application/json", sent) is None
    short = v.validate(b'{"predictions": [0.1, 0.2]}', "application/json", sent)
    assert short.code == "InvalidResponse" and str(short) == "InvalidResponse: has 2 rows; the request sent 3"
    assert str(v.validate(b"<html>oops</html>", "application/json",
                          sent)).startswith("InvalidResponse: cannot decode (application/json)")
    assert str(v.validate(b"", "application/json", sent)) == "InvalidResponse: empty response body"


def test_validator_checks_keys_and_shapes():
    v = ResponseValidator(create_serializer("protobuf"), expected_keys=["prob"], expected_shape=(None, 1))
    good = tfs_proto.encode_predict_response({"prob": np.zeros((2, 1), np.float32)})
    assert v.validate(good, "application/x-protobuf", Invocation(body=b"x", rows=2)) is None
    wrong_name = tfs_proto.encode_predict_response({"scores": np.zeros((2, 1), np.float32)})
    assert str(v.validate(wrong_name,
                          "application/x-protobuf")) == "InvalidResponse: missing output 'prob'; got ['scores']"
    flat = tfs_proto.encode_predict_response({"prob": np.zeros(2, np.float32)})
    assert "shape [2] does not match expected [*, 1]" in str(v.validate(flat, "application/x-protobuf"))


def test_one_content_type_table_names_every_format():
    assert format_of("Application/JSON; charset=utf-8") == "json"
    assert format_of("X-protobuf") == "protobuf"  # the seed's custom header
    assert format_of("application/jsonlines") == "jsonlines"
    assert format_of("image/png") is None and format_of(None) is None
    assert base_content_type(" Text/CSV ; header=present") == "text/csv"
    # every serializer's own Content-Type is in the table, under the format it reads
    for name in SERIALIZERS.names():
        s = create_serializer(name)
        assert format_of(s.content_type) in FORMATS
        if s.format is not None:
            assert format_of(s.content_type) == s.format


@pytest.mark.parametrize("name,content_type", [("json", "application/json"), ("csv", "text/csv"),
                                               ("npy", "application/x-npy"), ("protobuf", "X-protobuf")])
def test_every_format_counts_and_splits_its_own_rows(ranking_request, name, content_type):
    body = create_serializer(name).serialize(ranking_request)
    rows = int(np.asarray(ranking_request["feat_ids"]).shape[0])
    assert body_rows(body, content_type) == rows
    parts = split_body(body, content_type, 2, "body 1")
    assert sum(p.rows for p in parts) == rows
    assert [body_rows(p.body, content_type) for p in parts] == [p.rows for p in parts]


def test_json_lines_rows_are_lines():
    body = b'{"a": 1}\n{"a": 2}\n\n{"a": 3}\n'
    assert body_rows(body, "application/jsonlines") == 3
    assert [p.body for p in split_body(body, "application/jsonlines", 2, "x")] == [b'{"a": 1}\n{"a": 2}\n',
                                                                                   b'{"a": 3}\n']
    assert body_rows(b'{"instances": [1, 2]}\n', "application/jsonlines") == 2  # one line: a JSON document
    assert body_rows(b'{"a": 1}\nnot json\n', "application/jsonlines") is None
    with pytest.raises(UsageError, match="x: cannot split: line 2 of the JSON Lines body is not JSON"):
        split_body(b'{"a": 1}\nnot json\n', "application/jsonlines", 2, "x")
