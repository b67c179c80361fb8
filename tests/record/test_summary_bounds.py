"""A run folder's JSON is read only when it is of a size a run writes (record/runfolder.py `MAX_JSON_BYTES`),
and a summary.json of a schema these readers do not know is refused (record/schema.py `READ_SCHEMAS`)."""

from __future__ import annotations

import json

import pytest

from sm_locust.cli import main
from sm_locust.errors import UsageError
from sm_locust.record import runfolder
from sm_locust.record.runfolder import read_summary
from sm_locust.record.schema import READ_SCHEMAS
from sm_locust.record.summary import SCHEMA_VERSION

SUMMARY = {"schema": 1, "endpoint": "ep", "totals": {"requests": 100, "failures": 0, "rps": 10.0, "p50_ms": 5.0,
                                                     "p95_ms": 9.0, "p99_ms": 12.0, "errors": {}},
           "steps": [], "plateau": None}


def run(folder, **changes):
    folder.mkdir()
    (folder / "summary.json").write_text(json.dumps({**SUMMARY, **changes}))
    return folder


def test_the_schema_written_is_one_the_readers_read():
    assert SCHEMA_VERSION in READ_SCHEMAS


def test_a_summary_of_an_unknown_schema_is_refused(tmp_path):
    with pytest.raises(UsageError, match=r"its schema is 999, and this sm-locust reads schema 1"):
        read_summary(run(tmp_path / "future", schema=999), role="baseline")
    assert read_summary(run(tmp_path / "now"))["schema"] == 1


def test_a_baseline_of_an_unknown_schema_fails_smoke_in_one_line(tmp_path, monkeypatch, capsys):
    run(tmp_path / "run")
    run(tmp_path / "future", schema=999)
    monkeypatch.chdir(tmp_path)
    assert main(["smoke", "--run-dir", "run", "--baseline", "future"]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and "schema is 999" in lines[0], lines


def test_a_summary_at_the_size_bound_is_read_and_one_byte_more_is_refused(tmp_path, monkeypatch):
    folder = run(tmp_path / "run")
    size = (folder / "summary.json").stat().st_size
    monkeypatch.setattr(runfolder, "MAX_JSON_BYTES", size)
    assert read_summary(folder)["totals"]["requests"] == 100
    monkeypatch.setattr(runfolder, "MAX_JSON_BYTES", size - 1)
    with pytest.raises(UsageError, match=r"baseline .*summary.json is over 0 MB; no run writes one this large"):
        read_summary(folder, role="baseline")
