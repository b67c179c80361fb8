"""`ShapeSettings.from_options` reads each field from the option of its name: a field added to the
settings is read without a line of its own, and one with no option fails here, not in a run."""

from __future__ import annotations

from dataclasses import fields

from sm_locust.config.options import Options, parse_options
from sm_locust.shapes import settings as shape_settings
from sm_locust.shapes.settings import NOT_OPTIONS, OPTION_OF, ShapeSettings


def test_every_field_but_the_computed_ones_is_an_option():
    dests = set(parse_options({}))
    read = [OPTION_OF.get(f.name, f.name) for f in fields(ShapeSettings) if f.name not in NOT_OPTIONS]
    assert len(read) == len(fields(ShapeSettings)) - len(NOT_OPTIONS)
    assert [name for name in read if name not in dests] == []


def test_each_field_gets_its_own_options_value(monkeypatch):
    """Every option a distinct value: each lands in its field, none in another's."""
    values = {dest: f"value of {dest}" for dest in parse_options({})}
    monkeypatch.setattr(shape_settings, "token_objective", lambda options, percentile: f"objective at {percentile}")
    monkeypatch.setattr(ShapeSettings, "validate", lambda self: self)
    settings = ShapeSettings.from_options(Options(values), spawn_rate=3.0)
    for f in fields(ShapeSettings):
        if f.name not in NOT_OPTIONS:
            assert getattr(settings, f.name) == f"value of {OPTION_OF.get(f.name, f.name)}", f.name
    assert settings.max_duration_s == "value of max_duration"
    assert (settings.spawn_rate, settings.objective) == (3.0, "objective at value of slo_percentile")
