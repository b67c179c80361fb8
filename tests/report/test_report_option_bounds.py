"""The report options' ranges are declared once, in their OptionSpecs (sm_locust/report/options.py),
and refused alike by `sm-locust report`'s command line, its SM_LOCUST_REPORT_* variables, the Python
API's keywords (`result.report(...)`) and `sm-locust compare` / `sm_locust.compare`, which share them."""

from __future__ import annotations

import dataclasses

import pytest

from sm_locust.api.result import report_options
from sm_locust.cli import main
from sm_locust.errors import UsageError
from sm_locust.report import options
from sm_locust.report.options import CompareSettings
from sm_locust.report.pipeline import ReportOptions

RULE = "--target-rps must be at most 100, got"


@pytest.fixture
def target_rps_at_most_100(monkeypatch):
    specs = tuple(dataclasses.replace(s, maximum=100) if s.flag == "--target-rps" else s for s in options.OPTIONS)
    monkeypatch.setattr(options, "OPTIONS", specs)


def test_one_bound_changed_in_its_spec_is_refused_everywhere(target_rps_at_most_100, monkeypatch, capsys, tmp_path):
    for command in (["report", str(tmp_path / "run")], ["compare", str(tmp_path / "run")]):
        with pytest.raises(SystemExit) as stop:  # the command line
            main([*command, "--target-rps", "150"])
        assert stop.value.code == 2
        assert "argument --target-rps: must be at most 100, got '150'" in capsys.readouterr().err

    monkeypatch.setenv("SM_LOCUST_REPORT_TARGET_RPS", "150")  # the environment variable
    assert main(["report", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "SM_LOCUST_REPORT_TARGET_RPS='150' is not valid for --target-rps: must be at most 100" in err
    monkeypatch.delenv("SM_LOCUST_REPORT_TARGET_RPS")

    for refuse in (lambda: ReportOptions.parse({"target_rps": 150}),  # the Python keywords
                   lambda: report_options(False, {"target_rps": 150}),
                   lambda: CompareSettings.parse({"target_rps": 150})):
        with pytest.raises(UsageError, match=RULE):
            refuse()
    assert not (tmp_path / "run").exists()


def test_without_the_bound_the_same_value_is_taken():
    assert ReportOptions.parse({"target_rps": 150}).target_rps == 150.0
    assert report_options(False, {"target_rps": "150", "period": 120}).period == 120


def test_the_defaults_are_the_specs():
    parsed = ReportOptions.parse({})
    for spec in options.OPTIONS:
        assert getattr(parsed, spec.dest) == spec.default == getattr(ReportOptions(), spec.dest), spec.flag


def test_report_options_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        ReportOptions().period = 120  # type: ignore[misc]
