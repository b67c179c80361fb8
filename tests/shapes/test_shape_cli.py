"""`sm-locust run` with the shapes: bad settings refused before anything starts (one line, exit 2),
and a short plateau search that prints its verdict and writes it into summary.json."""

from __future__ import annotations

import json

import pytest

from sm_locust.config.openloop import OpenLoopSettings
from sm_locust.config.options import parse_bool, parse_number, parse_options
from sm_locust.errors import UsageError
from sm_locust.shapes.settings import ShapeSettings
from tests.conftest import SAMPLE_PAYLOAD, assert_one_line_error, run_cli

BASE = ("run", "--endpoint-name", "ep", "--endpoint-url", "http://127.0.0.1:9", "--payload", str(SAMPLE_PAYLOAD))
IR_BAD_USERS = ('{"TrafficType": "PHASES", '
                '"Phases": [{"InitialNumberOfUsers": 0, "SpawnRate": 1, "DurationInSeconds": 60}]}')
IR_BOTH = '{"Phases": [{"InitialNumberOfUsers": 1, "SpawnRate": 1, "DurationInSeconds": 60}], "Stairs": {}}'


@pytest.mark.e2e
@pytest.mark.parametrize("args,needles", [
    (("--shape", "step", "--step-users", "0"), ("--step-users", "at least 1")),
    (("--shape", "plateau", "--latency-slo-ms", "50", "--slo-percentile", "120"), ("--slo-percentile", "120")),
    (("--shape", "plateau", "--max-error-rate", "5"), ("--max-error-rate", "0.05")),
    (("--shape", "plateau", "--start-users", "8", "--max-users", "4"), ("--max-users", "--start-users")),
    (("--shape", "plateau", "-u", "4"), ("--users", "plateau")),
    (("--shape", "plateau", "--max-duration", "ten minutes"), ("--max-duration",)),
    (("--shape", "plateau", "--search-mode", "rate", "--start-rps", "100", "--max-rps", "50"),
     ("--start-rps", "--max-rps")),
    (("--shape", "phases",), ("--traffic-pattern",)),
    (("--shape", "phases", "--traffic-pattern", "{not json"), ("--traffic-pattern", "not valid JSON")),
    (("--shape", "phases", "--traffic-pattern", IR_BAD_USERS), ("InitialNumberOfUsers", "IR requires")),
    (("--shape", "phases", "--traffic-pattern", IR_BOTH), ("both Phases and Stairs",)),
    (("--shape", "phases", "--traffic-pattern", "missing-pattern.json"), ("missing-pattern.json",)),
    (("--shape", "step", "--traffic-pattern", IR_BAD_USERS), ("--shape phases",)),
    (("--shape", "open",), ("--target-rps",)),
    (("--target-rps", "0"), ("--target-rps", "more than 0")),
    (("--target-rps", "10", "--arrival", "gaussian"), ("gaussian", "poisson")),
    (("--shape", "step", "--arrival", "poisson"), ("--arrival", "open loop")),
    (("--shape", "plateaux",), ("plateaux", "plateau", "phases")),
])
def test_bad_shape_settings_are_one_line_usage_errors(tmp_path, args, needles):
    out = tmp_path / "r"
    result = run_cli(*BASE, *args, "--out", str(out), timeout=60)
    assert_one_line_error(result, 2, *needles)
    assert not out.exists()  # nothing started


@pytest.mark.parametrize("options,needle", [
    ({"stop_at_knee": "maybe"}, "--stop-at-knee must be true or false (or on/off, yes/no, 1/0), got 'maybe'"),
    ({"max_users": "lots"}, "--max-users must be a whole number, got 'lots'"),
    ({"max_users": 2.5}, "--max-users must be a whole number, got 2.5"),
    ({"step_seconds": True}, "--step-seconds must be a number, got True"),
    ({"rate_per_user": "fast"}, "--rate-per-user must be a number, got 'fast'"),
    ({"max_in_flight": "0"}, "--max-in-flight must be at least 1, got '0'"),
])
def test_garbage_from_the_web_ui_form_is_one_line_naming_the_option(options, needle):
    """The web UI hands a None-default option over as text: every value goes through one parser."""
    with pytest.raises(UsageError) as caught:
        ShapeSettings.from_options(parse_options(options))
    assert str(caught.value) == needle


def test_one_bool_and_one_number_parser():
    assert [parse_bool(v)
            for v in (True, "on", "YES", "1", None, "", "off", "false", False)] == [True] * 4 + [False] * 5
    assert parse_number("2", "--n", int) == 2 and parse_number(3.0, "--n", int) == 3 and parse_number("", "--n", float,
                                                                                                      7) == 7
    with pytest.raises(UsageError, match="--n must be a number, got 'x'"):
        parse_number("x", "--n")


def test_open_loop_settings_come_from_the_shape_settings_parser():
    options = parse_options({"arrival": "Poisson", "rate_per_user": "2", "max_in_flight": ""})
    assert OpenLoopSettings.from_options(options) == OpenLoopSettings("poisson", 2.0, 1000)
    assert ShapeSettings.from_options(options).open_loop() == OpenLoopSettings.from_options(options)
    assert OpenLoopSettings.from_options(parse_options({})) == OpenLoopSettings("constant", 1.0, 1000)


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_run_plateau_prints_the_verdict_and_writes_it(endpoint_factory, tmp_path):
    ep = endpoint_factory(max_concurrency=2, service_time_ms=20.0)
    out = tmp_path / "run"
    result = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", ep.url, "--payload", str(SAMPLE_PAYLOAD),
                     "--shape", "plateau", "--step-seconds", "2", "--max-users", "4", "--latency-slo-ms", "2000",
                     "--out", str(out), "-q", timeout=110)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((out / "summary.json").read_text())
    plateau = summary["plateau"]
    assert {"users", "rps", "p50_ms", "p95_ms", "p99_ms", "reason", "stable", "text"} <= set(plateau)
    assert plateau["users"] in (1, 2, 3, 4) and plateau["rps"] > 0
    lines = result.stdout.splitlines()
    assert any(line.startswith("sm-locust: step 1: 1 user:") for line in lines)
    # stated once, by the run's closing lines (the shape, told --sm-closing, leaves it to them)
    assert sum(plateau["text"] in line for line in lines) == 1 and f"sm-locust: {plateau['text']}" in lines
