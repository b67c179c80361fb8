"""`sm-locust serve`'s ranges are declared once, in its OptionSpecs, and every way in refuses the same
value in the same words: the command line, an SM_LOCUST_SERVE_* variable, a sweep file's `endpoint:`
and the Python `EndpointConfig` / `LocalEndpoint`."""

from __future__ import annotations

import dataclasses

import pytest

from sm_locust.cli import main
from sm_locust.endpoint import options
from sm_locust.endpoint.faults import EndpointConfig
from sm_locust.endpoint.server import LocalEndpoint
from tests.conftest import SAMPLE_PAYLOAD

RULE = "--latency-ms must be at most 100, got"


@pytest.fixture
def latency_at_most_100(monkeypatch):
    """`--latency-ms` gets a maximum, in its OptionSpec only."""
    specs = tuple(dataclasses.replace(s, maximum=100) if s.flag == "--latency-ms" else s for s in options.OPTIONS)
    monkeypatch.setattr(options, "OPTIONS", specs)


def test_one_bound_changed_in_its_spec_is_refused_everywhere(latency_at_most_100, monkeypatch, capsys, tmp_path):
    with pytest.raises(SystemExit) as stop:  # the command line: argparse's one line, exit 2
        main(["serve", "--latency-ms", "150"])
    assert stop.value.code == 2 and "argument --latency-ms: must be at most 100, got '150'" in capsys.readouterr().err

    monkeypatch.setenv("SM_LOCUST_SERVE_LATENCY_MS", "150")  # the environment variable
    assert main(["serve"]) == 2
    assert "SM_LOCUST_SERVE_LATENCY_MS='150' is not valid for --latency-ms: must be at most 100" in \
        capsys.readouterr().err
    monkeypatch.delenv("SM_LOCUST_SERVE_LATENCY_MS")

    with pytest.raises(ValueError, match=RULE):  # the Python API
        EndpointConfig(latency_ms=150).validate()
    with pytest.raises(ValueError, match=RULE):
        LocalEndpoint(port=8080, latency_ms=150).start()  # refused before it binds

    sweep = tmp_path / "sweep.yaml"  # a sweep file's endpoint: settings
    sweep.write_text(f"name: t\nendpoint: {{latency_ms: 150}}\ngrid: {{max_concurrency: [2]}}\n"
                     f"load: {{payload: {SAMPLE_PAYLOAD}}}\n"
                     "objective: {target_rps: 100, slo_ms: 400}\nprice_per_hour: 0.2\n")
    assert main(["sweep", str(sweep), "--plan"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{RULE} 150" in err


def test_without_the_bound_the_same_value_is_taken(monkeypatch):
    EndpointConfig(latency_ms=150).validate()
    monkeypatch.setenv("SM_LOCUST_SERVE_LATENCY_MS", "150")
    from sm_locust.cli import build_parser
    from sm_locust.cli.serve import config_from_args

    assert config_from_args(build_parser("serve").parse_args(["serve"])).latency_ms == 150.0
    assert config_from_args(build_parser("serve").parse_args(["serve", "--latency-ms", "5"])).latency_ms == 5.0


def test_the_config_defaults_are_the_specs():
    config = EndpointConfig()
    for spec in options.OPTIONS:
        if spec.default is not None and spec.dest in config.as_dict() and spec.dest not in ("llm", "multi_model"):
            assert getattr(config, spec.dest) == spec.default, spec.flag


def test_the_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        EndpointConfig().latency_ms = 5  # type: ignore[misc]


@pytest.mark.e2e
def test_a_child_endpoint_does_not_take_the_shells_serve_variables(monkeypatch):
    """LocalEndpoint's child gets its settings as flags: an SM_LOCUST_SERVE_* set for `sm-locust serve`
    in the parent's shell would otherwise change the endpoint a run, a demo or a sweep starts."""
    from sm_locust.endpoint import server

    seen: dict = {}

    def popen(command, **kwargs):
        seen.update(command=command, env=kwargs["env"])
        raise OSError("stop here")

    monkeypatch.setenv("SM_LOCUST_SERVE_LATENCY_MS", "5000")
    monkeypatch.setattr(server.subprocess, "Popen", popen)
    endpoint = LocalEndpoint(service_time_ms=5)
    with pytest.raises(OSError):
        endpoint.start()
    assert "SM_LOCUST_SERVE_LATENCY_MS" not in seen["env"]
    assert "--service-time-ms" in seen["command"] and "--latency-ms" not in seen["command"]
