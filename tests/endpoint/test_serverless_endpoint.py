"""The local endpoint's serverless emulation (endpoint/serverless.py): MaxConcurrency throttles with
ThrottlingException, a cold start for each new or reclaimed instance, warm reuse, compute scaled by
the memory size, ModelSetupTime for the CloudWatch stand-in; in process (a fake clock, then the WSGI
app behind gevent's server called by boto3) and once across two gunicorn workers."""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime

import gevent
from gevent.pywsgi import WSGIServer

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from sm_locust.cli.serve import add_parser, config_from_args
from sm_locust.endpoint.app import EndpointApp
from sm_locust.endpoint.counters import SharedCounters
from sm_locust.endpoint.faults import EndpointConfig
from sm_locust.endpoint.metrics import build_datums
from sm_locust.endpoint.server import LocalEndpoint
from sm_locust.endpoint.serverless import (
    NEVER,
    ServerlessConfig,
    ServerlessEmulator,
    SlotTable,
    choose_slot,
    compute_factor,
)
from sm_locust.errors import UsageError
from tests.conftest import SAMPLE_PAYLOAD


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_compute_scales_with_the_memory_size():
    assert compute_factor(6144) == 1.0
    assert compute_factor(2048) == 3.0
    assert compute_factor(1024) == 6.0
    assert compute_factor(4096, compute_share=0.5) == pytest.approx(0.5 + 0.5 * 1.5)
    assert compute_factor(1024, compute_share=0.0) == 1.0


def test_a_request_takes_the_most_recent_warm_slot_else_a_cold_one_else_none():
    # slot 0 warm (used 1 s ago), slot 1 warm (used 0.5 s ago), slot 2 never used
    assert choose_slot([0, 0, 0], [9.0, 9.5, NEVER], now=10.0, idle_timeout_s=4) == (1, False)
    assert choose_slot([0, 1, 0], [9.0, 9.5, NEVER], now=10.0, idle_timeout_s=4) == (0, False)
    assert choose_slot([1, 1, 0], [9.0, 9.5, NEVER], now=10.0, idle_timeout_s=4) == (2, True)
    assert choose_slot([0, 0], [1.0, 5.9], now=10.0, idle_timeout_s=4) == (0, True)  # both idle >= 4 s: reclaimed
    assert choose_slot([1, 1], [9.0, 9.5], now=10.0, idle_timeout_s=4) is None  # all busy: throttle


def test_throttled_above_max_concurrency_cold_after_idle_warm_reuse():
    clock = Clock()
    table = SlotTable(2, clock=clock)
    first, second = table.acquire(4.0), table.acquire(4.0)
    assert first.cold and second.cold and {first.slot, second.slot} == {0, 1}
    assert table.acquire(4.0) is None  # MaxConcurrency 2: the third concurrent request is throttled
    table.release(first)
    clock.now += 1.0
    table.release(second)
    again = table.acquire(4.0)
    assert again == type(again)(second.slot, False)  # warm, the most recently used instance
    table.release(again)
    clock.now += 3.5  # first idle 4.5 s (reclaimed), second 3.5 s (still warm)
    assert table.acquire(4.0) == type(again)(second.slot, False)
    assert table.acquire(4.0) == type(again)(first.slot, True)


def test_a_cold_start_waits_the_setup_time_and_counts_model_setup_time():
    slept: list[float] = []
    counters = SharedCounters()
    emulator = ServerlessEmulator(ServerlessConfig(memory_mb=2048, max_concurrency=1, idle_timeout_s=4), 700.0,
                                  counters, SlotTable(1, clock=Clock()), sleep=slept.append)

    class App:
        @staticmethod
        def _error(start_response, code, message):
            return [code]

    assert emulator.serve(App, None, lambda: ["answered"]) == ["answered"]
    assert slept == [0.7]
    assert emulator.serve(App, None, lambda: ["answered"]) == ["answered"]  # warm: no setup
    assert slept == [0.7]
    stats = counters.snapshot()
    assert stats["cold_starts"] == 1 and stats["model_setup_time_us_sum"] == 700_000.0


# -- the WSGI app, in process ---------------------------------------------------------------------------------


@pytest.fixture
def served():
    """EndpointApp with the emulation (2048 MB, MaxConcurrency 2, cold start 200 ms after 0.6 s idle, 10 ms at
    6144 MB -> 30 ms) behind gevent's WSGI server, and a boto3 client with retries off."""
    config = EndpointConfig(service_time_ms=10, cold_start_ms=200,
                            serverless=ServerlessConfig(memory_mb=2048, max_concurrency=2, idle_timeout_s=0.6))
    config.validate()
    app = EndpointApp(config)
    server = WSGIServer(("127.0.0.1", 0), app, log=None)
    server.start()
    client = boto3.client("sagemaker-runtime", endpoint_url=f"http://127.0.0.1:{server.server_port}",
                          config=Config(retries={"mode": "standard", "total_max_attempts": 1}, max_pool_connections=8))
    yield app, client
    server.stop()


def _call(client) -> tuple[float, str]:
    t0 = time.perf_counter()
    try:
        client.invoke_endpoint(EndpointName="sls", Body=SAMPLE_PAYLOAD.read_bytes(), ContentType="application/json")
        code = "ok"
    except ClientError as exc:
        code = exc.response["Error"]["Code"]
        assert exc.response["ResponseMetadata"]["HTTPStatusCode"] == 429
    return (time.perf_counter() - t0) * 1000.0, code


def _together(client, n: int) -> list[tuple[float, str]]:
    jobs = [gevent.spawn(_call, client) for _ in range(n)]
    gevent.joinall(jobs, timeout=10, raise_error=True)
    return [j.value for j in jobs]


@pytest.mark.e2e
def test_served_requests_meet_cold_starts_warm_reuse_and_throttles(served):
    app, client = served
    cold_ms, code = _call(client)
    assert code == "ok" and cold_ms >= 200 + 30  # a new instance: setup, then 10 ms x 6144 / 2048
    warm_ms, code = _call(client)
    assert code == "ok" and warm_ms >= 30
    assert app.counters.snapshot()["cold_starts"] == 1  # the same instance, warm

    results = _together(client, 5)
    codes = sorted(code for _, code in results)
    assert codes.count("ok") == 2 and codes.count("ThrottlingException") == 3  # MaxConcurrency 2
    # refused, not queued for a slot (a queued request would have been served) and not set up: of the burst's
    # five, one new instance (cold start 2 below) and three 429s
    assert app.counters.snapshot()["cold_starts"] == 2

    time.sleep(0.7)  # longer than the idle timeout: both instances reclaimed
    again_ms, code = _call(client)
    assert code == "ok" and again_ms >= 200

    stats = app.counters.snapshot()
    # cold: the first call, the second instance started by the concurrent burst, the call after idle
    assert stats["cold_starts"] == 3
    assert stats["ThrottlingException"] == 3 and stats["errors_4xx"] == 3
    assert stats["successes"] == 5 and stats["invocations"] == 8
    datums = build_datums({}, app.counters.take_window(), endpoint_name="sls",
                          timestamp=datetime.now(UTC))["AWS/SageMaker"]
    by_name = {d["MetricName"]: d["StatisticValues"] for d in datums}
    assert by_name["ModelSetupTime"] == {"SampleCount": 3.0, "Sum": 600_000.0, "Minimum": 200_000.0,
                                         "Maximum": 200_000.0}
    # the setup wait is overhead (outside the container's answer), the model's 30 ms is ModelLatency
    assert by_name["OverheadLatency"]["Maximum"] >= 200_000.0
    assert 30_000.0 <= by_name["ModelLatency"]["Minimum"] < 200_000.0


# -- flags -------------------------------------------------------------------------------------------------


def _config(*flags: str) -> EndpointConfig:
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    return config_from_args(parser.parse_args(["serve", *flags]))


def test_flags_build_the_emulation_and_round_trip_through_local_endpoint():
    config = _config("--serverless-memory-mb", "4096", "--serverless-max-concurrency", "8", "--cold-start-ms", "700",
                     "--idle-timeout-s", "4", "--service-time-ms", "20")
    assert config.serverless == ServerlessConfig(memory_mb=4096, max_concurrency=8, idle_timeout_s=4.0)
    command = LocalEndpoint(config).command()
    flags = command[command.index("serve") + 1:]
    assert _config(*flags[4:]).serverless == config.serverless  # after --host H --port P
    assert _config("--serverless-max-concurrency", "3").serverless.memory_mb == 2048
    assert _config().serverless is None


@pytest.mark.parametrize("flags, needle", [
    (["--serverless-memory-mb", "1500"], "1024-6144 in 1 GB steps"),
    (["--serverless-memory-mb", "8192"], "1024-6144 in 1 GB steps"),
    (["--serverless-max-concurrency", "0"], "outside SageMaker's 1-200"),
    (["--serverless-max-concurrency", "201"], "outside SageMaker's 1-200"),
    (["--idle-timeout-s", "4"], "add --serverless-memory-mb"),
    (["--serverless-max-concurrency", "2", "--max-concurrency", "2"], "--max-concurrency cannot be combined"),
    (["--serverless-memory-mb", "2048", "--serverless-compute-share", "1.5"], "between 0 and 1"),
])
def test_bad_serverless_flags_are_one_line_usage_errors(flags, needle):
    with pytest.raises(UsageError) as info:
        _config(*flags)
    assert needle in info.value.message and "\n" not in info.value.message


@pytest.mark.e2e
def test_max_concurrency_holds_across_two_gunicorn_workers(endpoint_factory):
    ep = endpoint_factory(workers=2, service_time_ms=100, cold_start_ms=300,
                          serverless=ServerlessConfig(memory_mb=6144, max_concurrency=3))
    client = boto3.client("sagemaker-runtime", endpoint_url=ep.url,
                          config=Config(retries={"mode": "standard", "total_max_attempts": 1}, max_pool_connections=16))
    results = _together(client, 8)
    ok = [ms for ms, code in results if code == "ok"]
    assert len(ok) == 3  # one table for both workers, not 3 each
    stats = ep.stats()
    # three instances busy at once and five refused: two workers that blocked on a cold start (a sleep
    # not gevent's) would hold at most two leases at a time, serve all eight and start two instances
    assert stats["ThrottlingException"] == 5 and stats["cold_starts"] == 3
