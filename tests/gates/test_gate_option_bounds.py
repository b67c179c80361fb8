"""The gate options are declared once, as OptionSpecs: a range changed in its spec is refused alike by
`sm-locust smoke`'s command line, its variable and the Python keywords (`GateSettings.parse`); and
`--max-error-rate` has one declaration in smoke (the run's option, whose value is the whole-run gate)."""

from __future__ import annotations

import dataclasses

import pytest

from sm_locust.cli import build_parser, main
from sm_locust.errors import UsageError
from sm_locust.gates import cli as gates_cli
from sm_locust.gates.cli import GateSettings

RULE = "--tolerance must be at most 0.5, got"


@pytest.fixture
def tolerance_at_most_half(monkeypatch):
    specs = tuple(dataclasses.replace(s, maximum=0.5) if s.flag == "--tolerance" else s for s in gates_cli.OPTIONS)
    monkeypatch.setattr(gates_cli, "OPTIONS", specs)


def test_one_bound_changed_in_its_spec_is_refused_everywhere(tolerance_at_most_half, monkeypatch, capsys, tmp_path):
    argv = ["smoke", "--run-dir", str(tmp_path / "run")]
    with pytest.raises(SystemExit) as stop:  # the command line
        main([*argv, "--tolerance", "0.8"])
    assert stop.value.code == 2 and "argument --tolerance: must be at most 0.5, got '0.8'" in capsys.readouterr().err

    monkeypatch.setenv("SM_LOCUST_TOLERANCE", "0.8")  # the environment variable
    assert main(argv) == 2
    assert "SM_LOCUST_TOLERANCE='0.8' is not valid for --tolerance: must be at most 0.5" in capsys.readouterr().err
    monkeypatch.delenv("SM_LOCUST_TOLERANCE")

    with pytest.raises(UsageError, match=RULE):  # the Python keywords
        GateSettings.parse({"tolerance": 0.8})
    assert GateSettings.parse({"tolerance": 0.4}).tolerance == 0.4


def test_smoke_declares_max_error_rate_once_and_gates_read_it():
    args = build_parser("smoke").parse_args(["smoke", "--run-dir", "x", "--max-error-rate", "0.05",
                                             "--max-p95-ms", "200", "--max-p95-ms", "predict=150"])
    assert args.max_error_rate == 0.05  # the run's option (a float), not the gates' repeatable text
    settings = GateSettings.parse(vars(args))
    assert settings.max_error_rate == ("0.05",) and settings.whole_run_error_rate
    assert settings.max_p95_ms == ("200", "predict=150")
    with pytest.raises(SystemExit):  # the run's declaration: one number, its range
        build_parser("smoke").parse_args(["smoke", "--max-error-rate", "predict=0.1"])


def test_a_gate_flag_declared_twice_is_an_error_not_a_silent_choice():
    parser = build_parser("smoke")
    sub = parser._subparsers._group_actions[0].choices["smoke"]  # type: ignore[union-attr]
    with pytest.raises(Exception, match="conflicting option string"):
        gates_cli.add_gate_arguments(sub)  # without shared=: --max-error-rate is already the run's
