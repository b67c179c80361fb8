"""Triton / KServe v2 conformance: the client and the local endpoint against the same byte-exact fixtures.

tests/fixtures/wire/triton/ holds requests and answers in both kinds and Triton's error bodies,
written from upstream's facts by its own make.py (never with sm-locust's code; README.md there).
Each request fixture must be: produced byte for byte by the `triton` / `triton-json` serializers
from its tensors (and by tritonclient), read back into the same tensors by the endpoint's Triton
reader; each answer fixture produced byte for byte by the endpoint's answer writer and read into
its tensors by the client's decoders (and tritonclient); each malformed request refused by the
endpoint with exactly the status and `{"error"}` body Triton gives.
"""

from __future__ import annotations

import json
import runpy

import locust  # noqa: F401  (gevent patching before tritonclient.http imports geventhttpclient)

import numpy as np
import pytest
import tritonclient.http as triton_http

from sm_locust.endpoint import triton
from sm_locust.endpoint.codecs import CodecError
from sm_locust.serializers import create_serializer, kserve
from tests.conftest import ROOT

WIRE = ROOT / "tests" / "fixtures" / "wire" / "triton"
INDEX = json.loads((WIRE / "index.json").read_text())
MODEL = triton.TritonModel.parse(INDEX["model"]["inputs"], INDEX["model"]["outputs"], INDEX["model"]["max_batch_size"])


def arrays(spec: dict) -> dict[str, np.ndarray]:
    """The fixture's tensors as numpy arrays of their datatype (BYTES: hex in the index)."""
    out = {}
    for name, t in spec.items():
        dt = kserve.DATATYPES[t["datatype"]]
        if dt.name == "BYTES":
            values = np.array([bytes.fromhex(v) for v in t["values"]], dtype=object)
        else:
            values = np.array(t["values"], dtype=dt.values)
        out[name] = values.reshape(t["shape"])
    return out


def model_of(entry: dict) -> triton.TritonModel:
    m = entry.get("model")
    return MODEL if m is None else triton.TritonModel.parse(m["inputs"], m["outputs"], m["max_batch_size"])


def same(got: np.ndarray, want: np.ndarray) -> None:
    if want.dtype == object:
        assert got.tolist() == want.tolist()
    else:
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype


@pytest.mark.parametrize("name", sorted(INDEX["requests"]))
def test_request_fixtures_are_what_the_client_sends(name):
    entry = INDEX["requests"][name]
    body = (WIRE / name).read_bytes()
    wanted = arrays(entry["tensors"])
    if name.startswith("doc_example"):  # the document's example names its model in the body: not ours to send
        return
    kind = "triton" if name.endswith(".bin") else "triton-json"
    ser = create_serializer(kind, input_datatypes=",".join(f"{n}={t['datatype']}" for n, t in entry["tensors"].items()),
                            output_names=",".join(entry["outputs"]),
                            binary_output="on" if any(entry["outputs"].values()) else "off")
    sent = {n: (np.array([bytes(v) for v in a.reshape(-1)], dtype="S").reshape(a.shape) if a.dtype == object else a)
            for n, a in wanted.items()}
    assert ser.encode(sent) == (body, entry["content_type"])


@pytest.mark.parametrize("name", sorted(INDEX["requests"]))
def test_request_fixtures_are_what_the_endpoint_reads(name):
    entry = INDEX["requests"][name]
    body = (WIRE / name).read_bytes()
    model = model_of(entry)
    request = triton.parse_request(model, body, entry["content_type"])
    wanted = arrays(entry["tensors"])
    assert list(request.inputs) == list(wanted)
    for key, want in wanted.items():
        same(request.inputs[key], want)
    assert request.outputs == (entry["outputs"] or {spec.name: False for spec in model.outputs})
    # the client's own reader agrees
    for key, want in wanted.items():
        same(kserve.decode_request(body, entry["content_type"]).tensors[key], want)


@pytest.mark.parametrize("name", sorted(INDEX["answers"]))
def test_answer_fixtures_are_what_the_endpoint_writes(name):
    entry = INDEX["answers"][name]
    tensors = [(kserve.Tensor(n, kserve.DATATYPES[t["datatype"]], a), entry["binary"][n])
               for (n, t), a in zip(entry["tensors"].items(), arrays(entry["tensors"]).values(), strict=True)]
    got = kserve.encode_answer(entry.get("model_name", "model"), "1", tensors, entry.get("request_id"))
    assert got == ((WIRE / name).read_bytes(), entry["content_type"])


@pytest.mark.parametrize("name", sorted(INDEX["answers"]))
def test_answer_fixtures_decode_in_the_client_and_in_tritonclient(name):
    entry = INDEX["answers"][name]
    body = (WIRE / name).read_bytes()
    wanted = arrays(entry["tensors"])
    for serializer in ("triton", "triton-json", "json"):
        decoded = create_serializer(serializer).deserialize(body, entry["content_type"])
        assert list(decoded) == list(wanted)
        for key, want in wanted.items():
            same(decoded[key], want)
    result = triton_http.InferenceServerClient.parse_response_body(
        body, header_length=kserve.header_size(entry["content_type"]))
    for key, want in wanted.items():
        same(result.as_numpy(key), want)


@pytest.mark.parametrize("case", sorted(INDEX["errors"]))
def test_malformed_requests_get_tritons_status_and_words(case):
    entry = INDEX["errors"][case]
    with pytest.raises(CodecError) as err:
        triton.parse_request(MODEL, (WIRE / "errors" / f"{case}.request").read_bytes(), entry["content_type"])
    assert err.value.status == entry["status"]
    assert str(err.value).encode() == (WIRE / "errors" / f"{case}.answer.json").read_bytes()


def test_the_fixtures_are_what_make_py_writes(tmp_path):
    """The committed bytes are the generator's: nobody edited a fixture by hand."""
    script = (WIRE / "make.py").read_text()
    (tmp_path / "make.py").write_text(script)
    runpy.run_path(str(tmp_path / "make.py"), run_name="__main__")
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.name != "make.py":
            assert path.read_bytes() == (WIRE / path.relative_to(tmp_path)).read_bytes(), path.name
