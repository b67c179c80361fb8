"""The Locust shapes as adapters: IR schedule played by PhasesShape, the knee found in-process against
a local endpoint of known capacity, open-loop sends counted, and summary.json's plateau and steps."""

from __future__ import annotations

import locust  # noqa: F401  (gevent patching before boto3)

import argparse
import json
from types import SimpleNamespace

import gevent
import pytest
from locust.env import Environment

from sm_locust.locustfiles.sagemaker import InvokeEndpointUser
from sm_locust.users.openloop import OpenLoopUser
from sm_locust.options import all_option_specs
from sm_locust.payloads import load_payloads
from sm_locust.plateau.synthetic import SyntheticEndpoint
from sm_locust.record.recorder import RunRecorder
from sm_locust.shapes.open import OpenLoopShape
from sm_locust.shapes.phases import PhasesShape
from sm_locust.shapes.plateau import PlateauShape
from tests.conftest import SAMPLE_PAYLOAD

TRITON = {"TrafficPattern": {"TrafficType": "PHASES",
                             "Phases": [{"InitialNumberOfUsers": 2, "SpawnRate": 2, "DurationInSeconds": 1500}]}}
PLATEAU_KEYS = {"users", "rps", "p50_ms", "p95_ms", "p99_ms", "reason", "stable", "text", "reached", "bound", "steps"}


def options(**values) -> argparse.Namespace:
    opts = argparse.Namespace(**{spec.dest: spec.default for spec in all_option_specs()})
    opts.headless = True
    for key, value in values.items():
        setattr(opts, key, value)
    return opts


def fake_runner(opts, recorder_seconds=None):
    """Just enough of a runner for a shape's decide(): options, user classes, a recorder with seconds."""
    env = SimpleNamespace(parsed_options=opts, process_exit_code=None,
                          sm_locust_recorder=SimpleNamespace(seconds=recorder_seconds or [], plateau=None,
                                                             current_target_rate=None))
    return SimpleNamespace(environment=env, user_classes=[InvokeEndpointUser])


def test_phases_shape_plays_the_triton_pattern():
    shape = PhasesShape()
    shape.runner = fake_runner(options(traffic_pattern=json.dumps(TRITON)))
    shape.settings = shape.settings or None
    from sm_locust.shapes.settings import ShapeSettings

    shape.start(ShapeSettings.from_options(shape.runner.environment.parsed_options))
    t0 = 1_000_000.0
    users = {t: shape.decide(t0 + t, []) for t in (0, 10, 29, 30, 59, 60, 600, 1499)}
    assert {t: u[0] for t, u in users.items()} == {0: 2, 10: 2, 29: 2, 30: 3, 59: 3, 60: 4, 600: 22, 1499: 51}
    assert users[0] == (2, 2.0)  # 2 users at once, then one every 30 s (SpawnRate is per minute)
    assert shape.decide(t0 + 1500, []) is None


def test_phases_shape_stops_when_invocations_flatten_and_names_the_plateau():
    # 20-s levels from a 4-slot x 40-ms endpoint (capacity 100 req/s, knee at 4 users).
    pattern = {"TrafficPattern": {"TrafficType": "STAIRS",
                                  "Stairs": {"DurationInSeconds": 20, "NumberOfSteps": 10, "UsersPerStep": 1}}}
    endpoint = SyntheticEndpoint(concurrency=4, service_ms=40.0)
    timeline = []
    shape = PhasesShape()
    shape.runner = fake_runner(options(traffic_pattern=json.dumps(pattern)), timeline)
    shape.runner.environment.sm_locust_recorder.seconds = timeline
    from sm_locust.shapes.settings import ShapeSettings

    shape.start(ShapeSettings.from_options(shape.runner.environment.parsed_options))
    t0 = endpoint.clock
    load = shape.decide(t0, timeline)
    while load is not None:
        timeline.extend(endpoint.users_step(load[0], seconds=20, ramp_s=0))
        load = shape.decide(endpoint.clock, timeline)
    verdict = shape.search.verdict()
    assert verdict.reached and verdict.plateau.users == 4 and verdict.plateau.rps == pytest.approx(100, rel=0.01)
    assert "throughput gain < 5 % over 4 steps" in verdict.text()
    assert len(verdict.steps) < 10  # stopped before the end of the stairs


def _environment(endpoint_url: str, shape, tmp_path, **values):
    opts = options(endpoint_name="ep", endpoint_url=endpoint_url, payload=str(SAMPLE_PAYLOAD), **values)
    env = Environment(user_classes=[InvokeEndpointUser, OpenLoopUser], shape_class=shape, parsed_options=opts)
    env.sm_locust_payloads = load_payloads(str(SAMPLE_PAYLOAD))
    runner = env.create_local_runner()
    env.sm_locust_recorder = RunRecorder(env, tmp_path, endpoint="ep")
    return env, runner


@pytest.mark.timeout(120)
def test_plateau_shape_finds_the_knee_of_a_known_capacity_endpoint(endpoint_factory, tmp_path, capsys):
    # 4 slots x 40 ms = 100 req/s; closed-loop users saturate it from ~4-5 users on.
    ep = endpoint_factory(max_concurrency=4, service_time_ms=40.0)
    env, runner = _environment(ep.url, PlateauShape(), tmp_path, step_seconds=5.0, max_users=8)
    runner.start_shape()
    runner.greenlet.join(timeout=110)
    summary = json.loads((tmp_path / "summary.json").read_text())
    plateau = summary["plateau"]
    assert PLATEAU_KEYS <= set(plateau)
    assert plateau["reached"] and plateau["bound"] == "throughput", plateau["text"]
    assert plateau["rps"] == pytest.approx(100, rel=0.15), plateau["text"]  # stated tolerance: +-15 %
    assert 3 <= plateau["users"] <= 8
    assert plateau["text"].startswith("plateau: ") and plateau["text"] in capsys.readouterr().out
    steps = summary["steps"]
    assert all({"users", "start", "end", "requests", "failures", "rps", "p50_ms", "p95_ms", "p99_ms",
                "stable", "client_cpu_pct"} <= set(s) for s in steps)
    assert any(s["users"] == plateau["users"] for s in steps)
    assert plateau["steps"] <= 12  # ~6 steps (1, 2, 4, 8, then bisection), each re-run at most once if unstable


@pytest.mark.timeout(60)
def test_open_loop_shape_sends_at_the_target_rate_and_counts_sends(endpoint_factory, tmp_path):
    ep = endpoint_factory(service_time_ms=5.0)
    env, runner = _environment(ep.url, OpenLoopShape(), tmp_path, target_rps=40.0, max_duration="6s", arrival="poisson")
    runner.start_shape()
    runner.greenlet.join(timeout=30)
    summary = json.loads((tmp_path / "summary.json").read_text())
    sends = summary["totals"]["open_loop"]
    assert sends["sent"] == pytest.approx(40 * 5, rel=0.35)  # Poisson count over ~5 s held
    assert sends["dropped"] == 0 and sends["late_fraction"] < 0.2
    assert summary["totals"]["requests"] <= sends["sent"]
    (step,) = summary["steps"]
    assert step["target_rate"] == 40.0 and step["users"] == 40  # one OpenLoopUser = 1 req/s
    assert step["sent_rps"] == pytest.approx(40, rel=0.35)
    assert summary["plateau"] is None


@pytest.mark.timeout(60)
def test_open_loop_latency_runs_from_the_intended_send_time(endpoint_factory, tmp_path):
    # 1 slot x 50 ms = 20 req/s offered 40 req/s: the queue grows, and so must the latency (no
    # coordinated omission), while every intended send still goes out on time.
    ep = endpoint_factory(max_concurrency=1, service_time_ms=50.0)
    env, runner = _environment(ep.url, OpenLoopShape(), tmp_path, target_rps=40.0, max_duration="5s")
    runner.start_shape()
    runner.greenlet.join(timeout=30)
    gevent.sleep(0)
    total = env.stats.total
    assert total.get_response_time_percentile(0.95) > 500  # a closed loop would report ~50-100 ms
    assert env.sm_locust_open_loop.sent >= 150 and env.sm_locust_open_loop.late <= 0.1 * env.sm_locust_open_loop.sent
