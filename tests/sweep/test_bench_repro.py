"""bench/repro.py's reading of a sweep's folder: a sweep cut before its end (its sweep.json a progress
write, ranked before any confirmation) is not an answer, so it is never counted as agreeing."""

from __future__ import annotations

import json
from pathlib import Path

from bench.repro import Run, agreement, read_run


def sweep_folder(tmp_path: Path, name: str, index: int, wall_s: float | None, interrupted: bool = False) -> Path:
    out = tmp_path / name
    out.mkdir()
    doc = {"wall_s": wall_s, "interrupted": interrupted,
           "recommendation": {"index": index, "reason": f"configuration {index}", "tied_with": []}}
    (out / "sweep.json").write_text(json.dumps(doc))
    return out


def read(out: Path, index: int) -> Run:
    run = Run(index, 1.0, 0.0, 0)
    read_run(run, out, None)
    return run


def test_a_finished_sweep_is_read_as_its_recommendation(tmp_path: Path) -> None:
    run = read(sweep_folder(tmp_path, "done", 6, 700.0), 1)
    assert (run.status, run.recommendation, run.tied) == ("ok", "6", False)


def test_a_sweep_cut_before_its_end_is_no_answer(tmp_path: Path) -> None:
    cut = read(sweep_folder(tmp_path, "cut", 6, None), 1)
    stopped = read(sweep_folder(tmp_path, "stopped", 6, 300.0, interrupted=True), 2)
    for run in (cut, stopped):
        assert run.status == "unfinished"
        assert run.recommendation is None
        assert "did not finish" in (run.reason or "")


def test_agreement_counts_only_finished_sweeps(tmp_path: Path) -> None:
    runs = [read(sweep_folder(tmp_path, "a", 6, 700.0), 1), read(sweep_folder(tmp_path, "b", 3, None), 2),
            read(sweep_folder(tmp_path, "c", 6, 710.0), 3)]
    out = agreement(runs)
    assert out["recommendation"] == "2 of 2 recommend configuration 6"
    assert out["errors"].startswith("1 of 3 runs")
