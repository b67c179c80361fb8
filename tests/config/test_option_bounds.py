"""An option's range is declared once, in its OptionSpec, and every way in refuses the same value
with the same words: the command line, an SM_LOCUST_* variable, the Python API's keywords, the web
UI's form text and a sweep file's `load:`."""

from __future__ import annotations

import dataclasses

import pytest

from sm_locust.api.options import run_arguments
from sm_locust.cli import main
from sm_locust.config import endpoint
from sm_locust.config.options import parse_options
from sm_locust.errors import UsageError
from sm_locust.locustfiles._webui import check_form_values
from sm_locust.sweep.load import parse_load
from sm_locust.sweep.objective import Objective
from tests.conftest import SAMPLE_PAYLOAD

RULE = "--think-time must be at most 2, got"


@pytest.fixture
def think_time_at_most_2(monkeypatch):
    """`--think-time` gets a maximum, in its OptionSpec only."""
    specs = [dataclasses.replace(s, maximum=2) if s.flag == "--think-time" else s for s in endpoint.OPTIONS]
    monkeypatch.setattr(endpoint, "OPTIONS", specs)


def test_one_bound_changed_in_its_spec_is_refused_everywhere(think_time_at_most_2, monkeypatch, capsys, tmp_path):
    argv = ["run", "--endpoint-name", "ep", "--payload", str(SAMPLE_PAYLOAD), "--out", str(tmp_path / "run")]
    with pytest.raises(SystemExit) as stop:  # the command line: argparse's one line, exit 2
        main([*argv, "--think-time", "3"])
    assert stop.value.code == 2 and "argument --think-time: must be at most 2, got '3'" in capsys.readouterr().err

    monkeypatch.setenv("SM_LOCUST_THINK_TIME", "3")  # the environment variable
    assert main(argv) == 2
    assert "SM_LOCUST_THINK_TIME='3' is not valid for --think-time: must be at most 2" in capsys.readouterr().err
    monkeypatch.delenv("SM_LOCUST_THINK_TIME")

    with pytest.raises(UsageError, match=RULE):  # the Python API: its keywords parsed by the same spec
        run_arguments({"endpoint_name": "ep", "think_time": 3})
    with pytest.raises(UsageError, match=RULE):  # the web UI form, and anything parse_options reads
        check_form_values({"think_time": "3"})
    with pytest.raises(UsageError, match=RULE):
        parse_options({"think_time": 3})
    with pytest.raises(UsageError, match="load.think_time: must be at most 2, got 3"):  # a sweep file
        parse_load({"payload": str(SAMPLE_PAYLOAD), "think_time": 3}, Objective(), source="s.yaml")
    assert not (tmp_path / "run").exists()  # nothing created


def test_without_the_bound_the_same_value_is_taken(tmp_path):
    assert parse_options({"think_time": 3}).think_time == 3.0
    assert run_arguments({"endpoint_name": "ep", "think_time": 3}).options.think_time == 3.0
