"""The local async endpoint's instances and their backlog autoscaling (endpoint/asyncscaling.py): the
control loop on a fake clock, then end to end against `serve --async` and moto: from zero, a few
requests wait forever under target tracking alone (the backlog never exceeds its target) and are
answered under the scale-from-zero step policy, after its alarm and the instance's start."""

from __future__ import annotations

import json

import pytest

from sm_locust.endpoint.asyncqueue import AsyncEndpointConfig
from sm_locust.endpoint.asyncscaling import AsyncCapacity, AsyncScalingConfig
from sm_locust.endpoint.server import LocalEndpoint
from sm_locust.errors import UsageError
from tests.conftest import SAMPLE_PAYLOAD, run_cli
from tests.fakes import moto_with_input

BUCKET = "async-scaling"


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_the_control_loop_scales_from_zero_serves_after_the_start_and_bills_what_served():
    config = AsyncScalingConfig(max_instances=2, instances=0, target_backlog=5.0, scale_from_zero=True,
                                instance_start_s=120, time_scale=60).validate()
    lines: list[str] = []
    clock = Clock()
    capacity = AsyncCapacity(config, backlog=lambda: 1.0, say=lines.append, clock=clock)
    assert not capacity.serves(0) and capacity.step(0, 1.0) is None
    decision = capacity.step(60, 1.0)
    assert decision is not None and (decision.t_s, decision.to_count, decision.ready_s) == (120, 1, 240)
    assert "async scale out 0 -> 1 at 120 s (HasBacklogWithoutCapacity 1), serving at 240 s" in lines[-1]
    capacity._serve_ready(239)
    assert not capacity.serves(0)
    capacity._serve_ready(240)
    assert capacity.serves(0) and not capacity.serves(1)
    assert capacity.billed.total(600) == 360  # one instance from 240 s


def test_the_settings_refuse_what_cannot_run():
    with pytest.raises(ValueError, match="does not hold"):
        AsyncScalingConfig(max_instances=1, instances=2).validate()
    with pytest.raises(UsageError, match="above 0"):
        AsyncScalingConfig(max_instances=1, target_backlog=0.0).validate()
    flags = AsyncScalingConfig(max_instances=3, instances=0, target_backlog=5.0, scale_from_zero=True).flags()
    assert flags[:2] == ["--async-max-instances", "3"] and flags[-1] == "--async-scale-from-zero"
    assert "target tracking ApproximateBacklogSizePerInstance = 5; scale from zero" in AsyncScalingConfig(
        max_instances=3, target_backlog=5.0, scale_from_zero=True).describe(2)


@pytest.mark.e2e
def test_the_serve_flags_refuse_what_cannot_run():
    result = run_cli("serve", "--async", "--async-output-path", "s3://b/out", "--async-target-backlog", "5")
    assert result.returncode == 2 and "add --async-max-instances N" in result.stderr
    result = run_cli("serve", "--async-max-instances", "2")
    assert result.returncode == 2 and "add --async" in result.stderr


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    yield from moto_with_input(tmp_path_factory.mktemp("moto"), BUCKET, SAMPLE_PAYLOAD.read_bytes())


def _from_zero(moto, tmp_path, name: str, scale_from_zero: bool):
    """About 8 requests to an endpoint scaled to zero (target 10 per instance), the emulated minute 1 real
    second; each call waits for its result until the run ends."""
    scaling = AsyncScalingConfig(max_instances=2, instances=0, target_backlog=10.0, scale_from_zero=scale_from_zero,
                                 instance_start_s=120, time_scale=60)
    config = AsyncEndpointConfig(output_path=f"s3://{BUCKET}/{name}/out", max_concurrent=2, s3_url=moto.url,
                                 scaling=scaling)
    with LocalEndpoint(log_path=tmp_path / f"{name}.log", service_time_ms=50, async_inference=config) as ep:
        result = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", ep.url, "--payload", str(SAMPLE_PAYLOAD),
                         "--shape", "open", "--target-rps", "1", "-t", "9s", "--async-timeout", "12",
                         "--async-input-location", f"s3://{BUCKET}/in/request.json", "--async-result", "s3",
                         "--async-poll-ms", "50", "--watch-scaling", "--out", str(tmp_path / name), env=moto.env())
        stats = ep.stats()
    assert result.returncode in (0, 1), result.stdout + result.stderr
    summary = json.loads((tmp_path / name / "summary.json").read_text())
    return summary["async"], stats, ep.log_path.read_text(), summary["autoscaling"]


@pytest.mark.e2e
def test_scale_from_zero_answers_what_target_tracking_alone_leaves_waiting(moto, tmp_path):
    alone, alone_stats, _, alone_watched = _from_zero(moto, tmp_path, "tracking", scale_from_zero=False)
    assert alone["accepted"] >= 2 and alone["results"] == 0  # the backlog never exceeds 10: no instance ever
    assert alone_stats["async_instances"] == 0 and alone_stats["async_instance_seconds_sum"] == 0
    assert alone_stats["async_scale_events"] == 0
    assert alone_watched["peak_instances"] == 0 and alone_watched["instance_hours"] == 0
    woken, stats, log, watched = _from_zero(moto, tmp_path, "from-zero", scale_from_zero=True)
    assert woken["accepted"] >= 2 and woken["results"] >= 1, woken
    assert "async scale out 0 -> 1" in log and "(HasBacklogWithoutCapacity" in log
    assert stats["async_scale_events"] >= 1 and stats["async_instance_seconds_sum"] > 0
    # the cold start from zero: the first call waits for 2 one-minute alarm periods and 120 s of instance
    # start (240 emulated s: 4 real s at x60), the calls after it find the instance serving
    assert woken["first_time_to_result_ms"] >= 4000 > woken["time_to_result"]["p50_ms"]
    assert alone["first_time_to_result_ms"] is None
    # `run --watch-scaling` read the instances as it reads a fleet's: DescribeEndpoint and the emulator's log
    assert watched["peak_instances"] >= 1 and watched["instance_hours"] > 0
    assert watched["scale_events"] and watched["scale_events"][0]["from"] == 0, watched["scale_events"]
