"""`sweep_reports` (tests/docs/runnable.py), which the runnable-blocks test reads a sweep's reports with:
each configuration's final report from sweep.json, an earlier measurement's folder accepted only when
sweep.json records it."""

from __future__ import annotations

import json

import pytest

from tests.docs.runnable import sweep_reports


def sweep_folder(tmp_path, configurations, folders):
    for name in folders:
        (tmp_path / name).mkdir()
        (tmp_path / name / "report.html").write_text("<html></html>")
    (tmp_path / "sweep.json").write_text(json.dumps({"configurations": configurations}))
    return tmp_path


def configuration(run_dir, **more):
    return {"run_dir": run_dir, "report": f"{run_dir}/report.html", **more}


def test_a_remeasured_configurations_first_folder_is_its_own_not_a_third_configuration(tmp_path):
    first = {"first_reason": "client CPU 95 %", "first_run_dir": "min-2.client-bound"}
    folder = sweep_folder(tmp_path, [configuration("min-1"), configuration("min-2", remeasured=first)],
                          ["min-1", "min-2", "min-2.client-bound"])
    assert sweep_reports(folder) == [folder / "min-1/report.html", folder / "min-2/report.html"]


def test_a_folder_sweep_json_does_not_record_fails(tmp_path):
    folder = sweep_folder(tmp_path, [configuration("min-1"), configuration("min-2")],
                          ["min-1", "min-2", "min-2.client-bound"])
    with pytest.raises(AssertionError, match="does not record: \\['min-2.client-bound'\\]"):
        sweep_reports(folder)


def test_a_configuration_without_its_report_fails(tmp_path):
    folder = sweep_folder(tmp_path, [configuration("min-1"), configuration("min-2")], ["min-1"])
    with pytest.raises(AssertionError):
        sweep_reports(folder)
