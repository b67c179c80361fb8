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


def plateau_folder(tmp_path: Path, name: str, knee: float, loads: list[float], granule: float | None) -> Path:
    out = tmp_path / name
    out.mkdir()
    plateau = {"load": knee, "users": knee, "knee_loads": loads, "capacity_rps": 1513.0,
               "capacity_ci95": [1505.0, 1521.0], **({"knee_granule": granule} if granule is not None else {})}
    (out / "summary.json").write_text(json.dumps({"verdict": {"status": "ok"}, "plateau": plateau}))
    return out


def test_knees_agree_within_the_granule_the_search_recorded(tmp_path: Path) -> None:
    # a knee of 34 users is placed to 2 users (5 % of it): 36 is the same knee, 37 is not
    runs = [read(plateau_folder(tmp_path, f"r{i}", knee, [knee - 1, knee], 2.0), i)
            for i, knee in enumerate((34.0, 34.0, 36.0, 37.0), start=1)]
    assert [r.knee_granule for r in runs] == [2.0] * 4
    assert agreement(runs)["knee"] == "3 of 4 conclusive runs within one granule (2) of 34"
    # uncertain: knee_loads reach further below the knee than its granule
    wide = read(plateau_folder(tmp_path, "wide", 37.0, [34.0, 37.0], 2.0), 5)
    assert wide.knee_uncertain and not runs[3].knee_uncertain
    assert "1 more said their knee uncertain" in agreement([*runs[:3], wide])["knee"]
    # a summary.json written before knee_granule was recorded: one user
    old = [read(plateau_folder(tmp_path, f"o{i}", knee, [knee, knee], None), i)
           for i, knee in enumerate((5.0, 5.0, 6.0, 7.0))]
    assert old[0].knee_granule == 1.0
    assert agreement(old)["knee"] == "3 of 4 conclusive runs within one granule (1) of 5"
