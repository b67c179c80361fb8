"""A symbolic link planted where sm-locust writes an output is refused in one line (exit 2) before anything is
written, and the file it points at is left as it was (util/outputs.py `refuse_link`)."""

from __future__ import annotations

import json
import os

import pytest

from sm_locust.cli import main

SUMMARY = {"schema": 1, "endpoint": "ep", "totals": {"requests": 100, "failures": 0, "rps": 10.0, "p50_ms": 5.0,
                                                     "p95_ms": 9.0, "p99_ms": 12.0, "errors": {}},
           "steps": [], "plateau": None}


@pytest.fixture
def scene(tmp_path, monkeypatch):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "summary.json").write_text(json.dumps(SUMMARY))
    (tmp_path / "secret").write_text("keep me")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def listing(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize(("link", "argv", "needle"), [
    ("reports/compare/compare.html", ["compare", "run"], "--out reports/compare/compare.html is a symbolic link"),
    ("reports/compare/compare.csv", ["compare", "run"], "compare.csv is a symbolic link"),
    ("run/report.html", ["report", "run", "--no-cloudwatch"], "RUN_DIR run/report.html is a symbolic link"),
    ("run/steps.csv", ["report", "run", "--no-cloudwatch"], "run/steps.csv is a symbolic link"),
    ("run/merged_timeseries.csv", ["report", "run", "--no-cloudwatch"], "merged_timeseries.csv is a symbolic link"),
    ("out/report.html", ["report", "run", "--no-cloudwatch", "--out", "out"], "--out out/report.html is a symbolic"),
    ("junit.xml", ["smoke", "--run-dir", "run", "--junit", "junit.xml"], "--junit junit.xml is a symbolic link"),
])
def test_a_planted_link_is_refused_before_anything_is_written(scene, capsys, link, argv, needle):
    (scene / link).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(scene / "secret", scene / link)
    before = listing(scene)
    assert main(argv) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("sm-locust") and needle in lines[0], lines
    assert (scene / "secret").read_text() == "keep me" and (scene / link).is_symlink()
    assert listing(scene) == before  # nothing written beside it either


def test_without_the_link_the_same_commands_write(scene):
    assert main(["compare", "run"]) == 1  # this bare run has gaps (no Locust CSVs): pages written, exit 1
    assert main(["report", "run", "--no-cloudwatch"]) == 1  # likewise
    assert (scene / "reports" / "compare" / "compare.html").is_file() and (scene / "run" / "report.html").is_file()
