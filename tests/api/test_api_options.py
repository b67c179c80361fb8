"""`sm_locust.run`'s keywords are `sm-locust run`'s options: parsed by the same OptionSpecs into the
same RunArguments, the same Locust command, with the same defaults and the same one-line errors."""

from __future__ import annotations

import json

import pytest

from sm_locust.api.options import run_arguments
from sm_locust.cli import build_parser
from sm_locust.config.options import forwarded_arguments
from sm_locust.core.arguments import RunArguments
from sm_locust.core.child import locust_command
from sm_locust.core.plan import plan_run
from sm_locust.errors import SmLocustError, UsageError
from tests.conftest import SAMPLE_PAYLOAD, run_cli


def cli_args(*argv: str) -> RunArguments:
    return RunArguments.parse(vars(build_parser("run").parse_args(["run", *argv])))


CASES = [
    ({"endpoint_name": "ep", "payload": str(SAMPLE_PAYLOAD), "users": 8, "run_time": "90s"},
     ["--endpoint-name", "ep", "--payload", str(SAMPLE_PAYLOAD), "-u", "8", "-t", "90s"]),
    ({"endpoint_name": "ep", "payload": str(SAMPLE_PAYLOAD), "shape": "plateau", "latency_slo_ms": 200,
      "slo_percentile": "p99", "step_seconds": 4.5, "max_users": 64, "transport": "boto3", "think_time": 0.01},
     ["--endpoint-name", "ep", "--payload", str(SAMPLE_PAYLOAD), "--shape", "plateau", "--latency-slo-ms", "200",
      "--slo-percentile", "p99", "--step-seconds", "4.5", "--max-users", "64", "--transport", "boto3",
      "--think-time", "0.01"]),
    ({"endpoint_name": "ep", "prompts": "llm", "stream": True, "quiet": True, "overwrite": True, "out": "x"},
     ["--endpoint-name", "ep", "--prompts", "llm", "--stream", "true", "-q", "--overwrite", "--out", "x"]),
]


@pytest.mark.parametrize("keywords, argv", CASES)
def test_keywords_parse_like_the_command_line(keywords, argv):
    api, cli = run_arguments(keywords), cli_args(*argv)
    assert api == cli and api.options.given == cli.options.given and api.run.given == cli.run.given
    # ... and so start the same Locust process with the same settings
    planned_api, planned_cli = plan_run(api), plan_run(cli)
    assert forwarded_arguments(planned_api.options) == forwarded_arguments(planned_cli.options)
    assert planned_api == planned_cli


def test_the_defaults_are_the_commands_including_the_environment(monkeypatch):
    monkeypatch.setenv("SM_LOCUST_THINK_TIME", "0.25")
    monkeypatch.setenv("SM_LOCUST_TRANSPORT", "boto3")
    args = run_arguments({"endpoint_name": "ep"})
    assert (args.options.think_time, args.options.transport) == (0.25, "boto3")
    assert (args.run.users, args.run.shape, args.run.out) == (None, None, None)
    assert args == cli_args("--endpoint-name", "ep")
    assert run_arguments({"endpoint_name": "ep", "think_time": 0.5}).options.think_time == 0.5  # a keyword wins


def test_values_of_other_types():
    pattern = {"Phases": [{"InitialNumberOfUsers": 1, "SpawnRate": 1, "DurationInSeconds": 5}]}
    args = run_arguments({"traffic_pattern": pattern, "stop_at_knee": True, "validate_response": False,
                          "processes": -1, "payload": "-odd-name.json"})
    assert json.loads(args.options.traffic_pattern) == pattern  # a dict goes as the JSON text the option takes
    assert args.options.stop_at_knee is True and args.options.validate_response is False
    assert args.run.processes == -1 and args.options.payload == "-odd-name.json"  # text, never a flag
    assert run_arguments({"users": None}).run.users is None  # None = not given


def test_locust_arguments_follow_as_after_double_dash(tmp_path):
    args = run_arguments({"endpoint_name": "ep", "users": 2, "payload": str(SAMPLE_PAYLOAD)},
                         locust_args=["--stop-timeout", "5"])
    planned = plan_run(args)
    command = locust_command(forwarded_arguments(planned.options), planned.load, tmp_path)
    assert command[-2:] == ["--stop-timeout", "5"]


@pytest.mark.parametrize("keywords, message", [
    ({"overwrite": "yes"}, "overwrite= is a switch (--overwrite): pass True or False, got 'yes'"),
    ({"userz": 3}, "unknown option userz=: did you mean users? the keywords are the options of `sm-locust run`"),
    ({"latency_slo": 3}, "unknown option latency_slo=: did you mean latency_slo_ms?"),
    ({"payload": object()}, "payload= takes a number, text or True/False (--payload), got a object"),
])
def test_bad_keywords_are_one_line_usage_errors(keywords, message):
    with pytest.raises(UsageError) as caught:
        run_arguments(keywords)
    assert message in caught.value.message and "\n" not in caught.value.message
    assert caught.value.exit_code == 2


@pytest.mark.e2e
@pytest.mark.parametrize("keywords, argv", [
    ({"users": "ten"}, ["-u", "ten"]),
    ({"spawn_rate": "fast"}, ["--spawn-rate", "fast"]),
    ({"read_timeout": float("nan")}, ["--read-timeout", "nan"]),
    ({"think_time": "slow"}, ["--think-time", "slow"]),
    ({"stream": "maybe"}, ["--stream", "maybe"]),
])
def test_a_bad_value_gets_the_commands_own_line(keywords, argv):
    with pytest.raises(UsageError) as caught:
        run_arguments({"endpoint_name": "ep", **keywords})
    cli = run_cli("run", "--endpoint-name", "ep", *argv)
    assert cli.returncode == 2 and cli.stderr.count("\n") == 1
    flag, _, problem = caught.value.message.partition(" ")  # "--users must be a whole number, got 'ten'"
    rule = problem.split(", got")[0]  # the same spec's words; the CLI shows the text it was given
    assert cli.stderr.startswith("sm-locust run: error: argument ") and flag in cli.stderr and rule in cli.stderr


def test_a_notebook_shows_the_line_not_a_traceback():
    error = UsageError("--users conflicts with --shape plateau: the shape decides the load")
    assert error._render_traceback_() == [f"UsageError: {error.message}"]
    assert isinstance(error, SmLocustError)
