"""The Python API's arguments of the wrong type are a TypeError naming the argument, before anything is written
or started (util/arguments.py)."""

from __future__ import annotations

import json

import pytest

import sm_locust
from sm_locust.endpoint.server import LocalEndpoint
from sm_locust.util.arguments import require_kind

SUMMARY = {"schema": 1, "endpoint": "ep", "totals": {"requests": 100, "failures": 0, "rps": 10.0, "p50_ms": 5.0,
                                                     "p95_ms": 9.0, "p99_ms": 12.0, "errors": {}},
           "steps": [], "plateau": None}


def listing(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_each_bad_type_names_its_argument_and_leaves_nothing(tmp_path, monkeypatch):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "summary.json").write_text(json.dumps(SUMMARY))
    (tmp_path / "s.yaml").write_text("name: s\n")
    monkeypatch.chdir(tmp_path)
    before = listing(tmp_path)
    cases = [
        (lambda: sm_locust.run("ep", endpoint_url="http://127.0.0.1:1", payload="x.json", out=b"x"),
         r"^out= must be a path"),
        (lambda: sm_locust.compare(["run"], out=123), r"^out= must be a path .* got int 123"),
        (lambda: sm_locust.sweep("s.yaml", yes="maybe"), r"^yes= must be True or False, got str 'maybe'"),
        (lambda: sm_locust.sweep("s.yaml", out=b"o"), r"^out= must be a path"),
        (lambda: LocalEndpoint(max_concurrency="x"), r"^max_concurrency= must be a whole number, got str 'x'"),
        (lambda: LocalEndpoint(latency_ms=True), r"^latency_ms= must be a number"),
        (lambda: sm_locust.load("run").figures(cloudwatch="yes"), r"^cloudwatch= must be True or False \(or None\)"),
        (lambda: sm_locust.create_client(None, None, "ep"), r"^create_client\(\) takes a transport name first"),
    ]
    for call, message in cases:
        with pytest.raises(TypeError, match=message):
            call()
    assert listing(tmp_path) == before


def test_the_right_types_pass():
    for value, annotation in ((3, "int"), (2.5, "float"), (3, "float"), (None, "int | None"), ("a", "str | None"),
                              (True, "bool"), ({"x": 1}, "dict"), (object(), "Any")):
        require_kind("x", value, annotation)
    endpoint = LocalEndpoint(port=1, max_concurrency=2, latency_ms=1)  # a port given: nothing bound, never started
    assert (endpoint.config.max_concurrency, endpoint.config.latency_ms) == (2, 1)
