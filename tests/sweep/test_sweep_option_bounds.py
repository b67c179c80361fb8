"""`sm-locust sweep` takes its options from OptionSpecs, and a run option's range written once in its
spec is refused alike in the sweep file's `load:`, in a `--set load.KEY=VALUE` override and through
the Python `sm_locust.sweep.api.load_sweep`."""

from __future__ import annotations

import dataclasses

import pytest

from sm_locust.cli import build_parser, main
from sm_locust.cli.sweep import SweepSettings
from sm_locust.config import endpoint
from sm_locust.errors import UsageError
from sm_locust.sweep import api
from tests.conftest import SAMPLE_PAYLOAD

RULE = "load.think_time: must be at most 2, got 3"


@pytest.fixture
def think_time_at_most_2(monkeypatch):
    specs = [dataclasses.replace(s, maximum=2) if s.flag == "--think-time" else s for s in endpoint.OPTIONS]
    monkeypatch.setattr(endpoint, "OPTIONS", specs)


def _file(tmp_path, load: str = ""):
    path = tmp_path / "sweep.yaml"
    path.write_text(f"name: t\nendpoint: {{service_time_ms: 40}}\ngrid: {{max_concurrency: [2]}}\n"
                    f"load: {{payload: {SAMPLE_PAYLOAD}{load}}}\nobjective: {{target_rps: 100, slo_ms: 400}}\n"
                    "price_per_hour: 0.2\n")
    return path


def test_a_load_bound_is_refused_by_the_file_the_override_and_the_api(think_time_at_most_2, tmp_path, capsys):
    in_file = _file(tmp_path, ", think_time: 3")
    assert main(["sweep", str(in_file), "--plan"]) == 2
    assert RULE in capsys.readouterr().err
    plain = _file(tmp_path)
    assert main(["sweep", str(plain), "--plan", "--set", "load.think_time=3"]) == 2
    assert RULE in capsys.readouterr().err
    with pytest.raises(UsageError, match=RULE):
        api.load_sweep(str(plain), overrides=["load.think_time=3"])


def test_the_sweep_options_are_parsed_once():
    args = build_parser("sweep").parse_args(["sweep", "s.yaml", "--plan", "--set", "a=1", "--set", "b=2"])
    settings = SweepSettings.parse(args)
    assert (settings.sweep_file, settings.plan, settings.yes, settings.overrides) == ("s.yaml", True, False,
                                                                                      ("a=1", "b=2"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.yes = True  # type: ignore[misc]
