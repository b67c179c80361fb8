"""Payload sources and selection, as a user pointing --payload at them sees them."""

from __future__ import annotations

import base64
import collections
from pathlib import Path

import numpy as np
import orjson
import pytest

from sm_locust.endpoint import codecs
from sm_locust.endpoint.model import sample_rows
from sm_locust.errors import UnknownNameError, UsageError
from sm_locust.invocation import Invocation
from sm_locust.payloads import CALLABLE_LIMIT, PayloadPool, load_payloads
from sm_locust.payloads.split import PARTS
from sm_locust.serializers import create_serializer

DATA = Path(__file__).parent.parent / "data" / "payloads"
PACKAGE_DATA = Path(__file__).parent.parent.parent / "sm_locust" / "data"


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# -- a single file (the skeleton's behaviour) ---------------------------------------------------


def test_a_plain_file_is_sent_verbatim(tmp_path):
    body = b'{"instances": [{"feat_ids": [1], "feat_vals": [0.5]}]}'
    (tmp_path / "req.json").write_bytes(body)
    pool = load_payloads(str(tmp_path / "req.json"), accept="application/json", target_variant="blue")
    inv = pool.next()
    assert inv.body == body and inv.content_type == "application/json" and inv.accept == "application/json"
    assert inv.target_variant == "blue" and inv.rows == 1
    assert pool.sizes() == {"count": 1, "min_bytes": len(body), "avg_bytes": float(len(body)), "max_bytes": len(body)}


def test_content_type_comes_from_the_extension_unless_overridden(tmp_path):
    (tmp_path / "rows.csv").write_bytes(b"1,2\n")
    assert load_payloads(tmp_path / "rows.csv").next().content_type == "text/csv"
    assert load_payloads(tmp_path / "rows.csv",
                         content_type="application/x-custom").next().content_type == "application/x-custom"


def test_missing_and_empty_files_say_so(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        load_payloads(tmp_path / "nope.json")
    (tmp_path / "empty.json").write_bytes(b"")
    with pytest.raises(UsageError, match="is empty; SageMaker rejects empty bodies"):
        load_payloads(tmp_path / "empty.json")


def test_the_packaged_samples_load_and_fit_the_ranking_model():
    pool = load_payloads(PACKAGE_DATA / "ranking_50rows.json")
    ids, vals = codecs.decode_request(pool.next().body, "application/json")
    assert ids.shape == (50, 39) and pool.next().rows == 50
    jsonl = load_payloads(PACKAGE_DATA / "ranking_invoke_args.jsonl")
    assert jsonl.selection == "weighted"
    for inv in jsonl.invocations:
        ids, _ = codecs.decode_request(inv.body, inv.content_type, inv.custom_attributes)
        assert ids.shape[0] == inv.rows


# -- invoke-args JSONL --------------------------------------------------------------------------


def test_jsonl_in_the_sm_serverless_format():
    pool = load_payloads(DATA / "invoke_args.jsonl", selection="round-robin")
    first, second, png, js = pool.invocations
    assert (first.body, first.content_type) == (b"1,2,3,4,5", "text/csv")
    assert second.accept == "application/json"
    assert png.body.startswith(b"\x89PNG") and png.content_type == "image/png"
    assert (png.custom_attributes, png.target_variant) == ("trace=1", "blue")
    assert orjson.loads(js.body) == {"instances": [[1.0, 2.0]]}
    assert (js.target_model, js.inference_component) == ("m1.tar.gz", "ic-1")
    assert [pool.next() for _ in range(5)] == [first, second, png, js, first]


def test_run_wide_headers_fill_in_what_a_line_leaves_unset():
    pool = load_payloads(DATA / "invoke_args.jsonl", accept="text/csv", target_variant="green")
    first, second, png, _ = pool.invocations
    assert first.accept == "text/csv" and second.accept == "application/json"
    assert first.target_variant == "green" and png.target_variant == "blue"


def test_base64_for_every_line_with_the_flag(tmp_path):
    path = _write(tmp_path / "b.jsonl", orjson.dumps({"Body": base64.b64encode(b"\x00\x01").decode()}).decode())
    assert load_payloads(path, base64=True).next().body == b"\x00\x01"
    assert load_payloads(path).next().body == base64.b64encode(b"\x00\x01")  # without the flag: text


@pytest.mark.parametrize(
    "line,why",
    [
        ('{"Body": "1,2", "ContentType": "text/csv"', "not valid JSON"),
        ('["1,2"]', 'expected a JSON object with a "Body" key, got a JSON list'),
        ('{"ContentType": "text/csv"}', 'no "Body" key'),
        ('{"Body": "1", "Contenttype": "text/csv"}',
         "unknown key 'Contenttype'; valid keys: Body, BodyEncoding, ContentType"),
        ('{"Body": "not base64!", "BodyEncoding": "base64"}', "Body is marked base64 but does not decode"),
        ('{"Body": "abc", "BodyEncoding": "hex"}', "BodyEncoding 'hex' is not one of: base64, utf-8, text"),
        ('{"Body": ""}', "the body is empty"),
        ('{"Body": 12}', "Body must be text"),
        ('{"Body": "1", "Weight": -1}', "Weight must be a number >= 0"),
        ('{"Body": "1", "Accept": 5}', "Accept must be a string"),
    ],
)
def test_malformed_jsonl_names_file_line_and_why(tmp_path, line, why):
    path = _write(tmp_path / "args.jsonl", '{"Body": "ok"}\n\n' + line + "\n")
    with pytest.raises(UsageError) as err:
        load_payloads(path)
    assert str(err.value).startswith(f"{path}:3: ") and why in str(err.value)


def test_an_empty_jsonl_is_refused(tmp_path):
    with pytest.raises(UsageError, match="holds no invocations"):
        load_payloads(_write(tmp_path / "e.jsonl", "\n\n"))


def test_files_saved_with_a_byte_order_mark_are_read(tmp_path):
    """Excel's "CSV UTF-8" and Notepad start a file with EF BB BF: the first JSONL line, the first prompt
    and a CSV body's first row were refused or miscounted."""
    from sm_locust.payloads.llm import read_prompts
    from sm_locust.serializers.csv_format import csv_rows, split_csv

    bom = "\ufeff"
    pool = load_payloads(_write(tmp_path / "args.jsonl", bom + '{"Body": "1,2"}\n{"Body": "3,4"}\n'))
    assert [i.body for i in pool.invocations] == [b"1,2", b"3,4"]
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "hi"}\n', encoding="utf-8-sig")
    assert read_prompts(prompts, "tgi") == [("hi", None)]
    body = (bom + "1,2,3\n4,5,6\n").encode()
    assert csv_rows(body) == 2  # the first row was read as a header
    assert [part.body for part in split_csv(body, 2, "x")] == [b"1,2,3\n", b"4,5,6\n"]


# -- folders ------------------------------------------------------------------------------------


def test_a_folder_sends_each_file_with_its_content_type():
    pool = load_payloads(DATA / "folder")
    assert [i.content_type for i in pool.invocations] == ["application/json", "text/csv", "image/png"]
    assert [i.rows for i in pool.invocations] == [1, 2, None]
    assert load_payloads(DATA / "folder",
                         content_type="application/octet-stream").next().content_type == "application/octet-stream"


def test_folder_weights_by_file_name():
    pool = load_payloads(DATA / "folder", weights={"c_image.png": 0, "a_request.json": 3})
    assert pool.selection == "weighted" and pool.weights == [3.0, 1.0, 0.0]
    assert {pool.next().content_type for _ in range(200)} == {"application/json", "text/csv"}
    with pytest.raises(UsageError, match="weight given for 'x.bin', which is not a file"):
        load_payloads(DATA / "folder", weights={"x.bin": 1})


def test_an_empty_folder_is_refused(tmp_path):
    (tmp_path / ".only_hidden").write_bytes(b"x")
    with pytest.raises(UsageError, match="holds no files"):
        load_payloads(tmp_path)


# -- arrays -------------------------------------------------------------------------------------


def test_npz_rows_are_batched_and_encoded_once(tmp_path):
    ids, vals = sample_rows(100)
    np.savez(tmp_path / "rows.npz", feat_ids=ids, feat_vals=vals)
    pool = load_payloads(tmp_path / "rows.npz", serializer="protobuf", batch_size=8, max_bodies=5)
    assert len(pool) == 5 and {i.rows for i in pool.invocations} == {8}
    assert {i.content_type for i in pool.invocations} == {"application/x-protobuf"}
    seen = set()
    for inv in pool.invocations:
        got_ids, got_vals = codecs.decode_request(inv.body, inv.content_type)
        rows = [int(np.flatnonzero((ids == r).all(axis=1))[0]) for r in got_ids]
        assert np.array_equal(vals[rows], got_vals)
        seen.update(rows)
    assert len(seen) == 40  # 5 batches of 8 distinct rows


def test_npy_packed_rows_with_numpy_raw_reach_the_endpoint(tmp_path):
    ids, vals = sample_rows(10)
    packed = create_serializer("npy").deserialize(create_serializer("npy").serialize({"feat_ids": ids,
                                                                                      "feat_vals": vals}))
    np.save(tmp_path / "packed.npy", packed)
    pool = load_payloads(tmp_path / "packed.npy", serializer="numpy-raw", batch_size=4)
    assert len(pool) == 3  # ceil(10 / 4)
    inv = pool.next()
    assert inv.custom_attributes == "shape=4,78;dtype=float32" and inv.content_type == "application/octet-stream"
    assert codecs.decode_request(inv.body, inv.content_type, inv.custom_attributes)[0].shape == (4, 39)


def test_batches_larger_than_the_file_wrap_around(tmp_path):
    np.save(tmp_path / "one.npy", np.arange(78, dtype=np.float32).reshape(1, 78))
    pool = load_payloads(tmp_path / "one.npy", serializer="npy", batch_size=500)
    assert len(pool) == 1 and create_serializer("npy").deserialize(pool.next().body).shape == (500, 78)


def test_array_misfits_are_usage_errors(tmp_path):
    np.savez(tmp_path / "bad.npz", feat_ids=np.zeros((4, 38)), feat_vals=np.zeros((4, 38)))
    with pytest.raises(UsageError, match=r"serializer 'json'.*\[N, 39\].*got \[1, 38\]"):
        load_payloads(tmp_path / "bad.npz")
    np.savez(tmp_path / "ragged.npz", feat_ids=np.zeros((4, 39)), feat_vals=np.zeros((3, 39)))
    with pytest.raises(UsageError, match="same number of rows.*feat_ids=4, feat_vals=3"):
        load_payloads(tmp_path / "ragged.npz")
    np.save(tmp_path / "wide.npy", np.zeros((4, 80), np.float32))
    with pytest.raises(UsageError, match="do not fit shape"):
        load_payloads(tmp_path / "wide.npy", serializer="numpy-raw", serializer_options={"shape": "N,78"})
    np.save(tmp_path / "empty.npy", np.zeros((0, 78), np.float32))
    with pytest.raises(UsageError, match="holds no rows"):
        load_payloads(tmp_path / "empty.npy")
    with pytest.raises(UsageError, match="batch size must be a whole number >= 1"):
        load_payloads(tmp_path / "wide.npy", batch_size=0)


def test_pickled_arrays_are_refused(tmp_path):
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(UsageError, match="refused: this .npy holds Python objects"):
        load_payloads(tmp_path / "objects.npy")
    np.savez(tmp_path / "objects.npz", x=np.array([{"a": 1}], dtype=object))
    with pytest.raises(UsageError, match="refused"):
        load_payloads(tmp_path / "objects.npz")


# -- callables ----------------------------------------------------------------------------------


def test_a_function_in_a_file_yields_every_kind_of_item():
    pool = load_payloads(f"{DATA / 'make_payloads.py'}:mixed", selection="round-robin")
    ranking, raw, given, args = pool.invocations
    assert ranking.content_type == "application/json" and ranking.rows == 1
    assert codecs.decode_request(ranking.body, ranking.content_type)[0].tolist() == [list(range(39))]
    assert raw.body == b'{"instances": [[1, 2]]}' and raw.content_type == "application/json"
    assert given == Invocation(body=b"1,2", content_type="text/csv")
    assert (args.body, args.content_type) == (b"3,4", "text/csv")
    assert load_payloads(f"{DATA / 'make_payloads.py'}:mixed").weights == [1.0, 1.0, 1.0, 5.0]


def test_an_endless_generator_is_capped(monkeypatch):
    monkeypatch.setattr("sm_locust.payloads.callables.CALLABLE_LIMIT", 50)
    assert len(load_payloads(f"{DATA / 'make_payloads.py'}:endless")) == 50
    assert CALLABLE_LIMIT == 10_000


def test_a_module_function_is_imported_by_name(monkeypatch):
    monkeypatch.syspath_prepend(str(DATA))
    assert len(load_payloads("make_payloads:mixed")) == 4
    with pytest.raises(UsageError, match="payload function sm_locust.endpoint.model:sample_rows raised TypeError"):
        load_payloads("sm_locust.endpoint.model:sample_rows")


@pytest.mark.parametrize(
    "spec,why",
    [
        ("no_such_module_xyz:make", "cannot import module 'no_such_module_xyz'"),
        ("sm_locust.errors:nothing_here", "has no function 'nothing_here'"),
        ("sm_locust.errors:__doc__", "is not callable"),
        ("missing/file.py:make", "payload module file 'missing/file.py' does not exist"),
    ],
)
def test_callable_sources_explain_what_is_missing(spec, why):
    with pytest.raises(UsageError, match=why):
        load_payloads(spec)


def test_a_failing_function_is_reported_not_raised():
    with pytest.raises(UsageError, match="raised RuntimeError: database is down"):
        load_payloads(f"{DATA / 'make_payloads.py'}:broken")


# -- selection ----------------------------------------------------------------------------------


def _pool(n: int, **kw) -> PayloadPool:
    return PayloadPool([Invocation(body=bytes([65 + i])) for i in range(n)], "test", **kw)


def test_random_selection_is_seeded_and_covers_the_pool():
    p1, p2 = _pool(4, selection="random", seed=7), _pool(4, selection="random", seed=7)
    draws = [p1.next().body for _ in range(400)]
    assert draws == [p2.next().body for _ in range(400)]
    assert set(draws) == {b"A", b"B", b"C", b"D"}


def test_weighted_selection_follows_the_weights():
    pool = _pool(3, weights=[6, 3, 1], seed=1)
    counts = collections.Counter(pool.next().body for _ in range(10_000))
    assert 0.55 < counts[b"A"] / 10_000 < 0.65 and 0.25 < counts[b"B"] / 10_000 < 0.35


def test_selection_errors():
    with pytest.raises(UnknownNameError,
                       match="unknown payload selection 'shuffle'; choose one of: random, round-robin, weighted"):
        _pool(2, selection="shuffle")
    with pytest.raises(UsageError, match="weighted selection needs weights"):
        _pool(2, selection="weighted")
    with pytest.raises(UsageError, match="2 weights given for 3 payloads"):
        _pool(3, weights=[1, 2])
    with pytest.raises(UsageError, match="sum to 0"):
        _pool(2, weights=[0, 0])


def test_json_lines_bodies_count_and_split_one_row_per_line(tmp_path):
    ids, vals = sample_rows(5, seed=2)
    lines = [orjson.dumps({"feat_ids": i.tolist(), "feat_vals": v.tolist()}) for i, v in zip(ids, vals, strict=True)]
    (tmp_path / "rows.jsonl.txt").write_bytes(b"\n".join(lines) + b"\n")
    pool = load_payloads(tmp_path / "rows.jsonl.txt", content_type="application/jsonlines", split=2)
    (whole,) = pool.invocations
    assert whole.rows == 5
    parts = whole.extra[PARTS]
    assert [p.rows for p in parts] == [3, 2]
    assert [p.body.count(b"\n") for p in parts] == [3, 2]
    decoded = [codecs.decode_request(p.body, p.content_type) for p in parts]
    np.testing.assert_array_equal(np.vstack([d[0] for d in decoded]), ids)
    # one line is one JSON document: counted and split by its instances, as application/json
    one = orjson.dumps({"instances": [{"feat_ids": i.tolist(), "feat_vals": v.tolist()}
                                      for i, v in zip(ids, vals, strict=True)]})
    (tmp_path / "one.txt").write_bytes(one + b"\n")
    (whole,) = load_payloads(tmp_path / "one.txt", content_type="application/jsonlines", split=5).invocations
    assert whole.rows == 5 and [p.rows for p in whole.extra[PARTS]] == [1] * 5
