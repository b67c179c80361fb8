"""`sm-locust demo`'s options are OptionSpecs like `run`'s: each flag declared once (type, default,
range), parsed once into `DemoSettings`; a bound changed in its spec is refused on the command line."""

from __future__ import annotations

import dataclasses

import pytest

from sm_locust.cli import build_parser, demo, main
from sm_locust.errors import UsageError


def _demo_parser():
    parser = build_parser("demo")
    (subparsers,) = [a for a in parser._actions if a.dest == "command"]
    return subparsers.choices["demo"]


def test_every_flag_of_demo_is_one_of_its_specs():
    flags = {flag for action in _demo_parser()._actions for flag in action.option_strings} - {"-h", "--help"}
    declared = {spec.flag for spec in demo.OPTIONS} | {spec.short for spec in demo.OPTIONS if spec.short}
    assert flags == declared and len(demo.OPTIONS) == 10
    assert {spec.dest for spec in demo.OPTIONS} == {f.name for f in dataclasses.fields(demo.DemoSettings)}


def test_the_command_line_and_a_mapping_parse_alike():
    given = ["demo", "--step-seconds", "1.5", "--max-users", "3", "--no-cloudwatch", "-v"]
    settings = demo.DemoSettings.parse(vars(_demo_parser().parse_args(given[1:])))
    assert settings == demo.DemoSettings(step_seconds=1.5, max_users=3, no_cloudwatch=True, verbose=True)
    assert demo.DemoSettings.parse({}) == demo.DemoSettings()  # the specs' defaults are the record's
    assert demo.DemoSettings.parse({"step_seconds": "1.5", "max_users": 3, "no_cloudwatch": True,
                                    "verbose": "true"}) == settings
    with pytest.raises(UsageError, match=r"^--step-seconds must be more than 0, got '0'"):
        demo.DemoSettings.parse({"step_seconds": "0"})


def test_a_bound_changed_in_its_spec_is_refused_on_the_command_line(monkeypatch, capsys):
    specs = tuple(dataclasses.replace(s, maximum=8) if s.flag == "--max-concurrency" else s for s in demo.OPTIONS)
    monkeypatch.setattr(demo, "OPTIONS", specs)
    with pytest.raises(SystemExit) as stop:
        main(["demo", "--max-concurrency", "9"])
    assert stop.value.code == 2
    assert "argument --max-concurrency: must be at most 8, got '9'" in capsys.readouterr().err
