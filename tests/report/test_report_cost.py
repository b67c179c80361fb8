"""Cost arithmetic, checked against the figures users know (ResNet50 post: c5.xlarge ~40,000 TPH)."""

from __future__ import annotations

import json

import pytest

from sm_locust.errors import UsageError
from sm_locust.record.model import SustainablePoint
from sm_locust.report import cost


def test_cost_per_million_and_tph():
    # ml.c5.xlarge at $0.204/h serving 11.11 rps -> ~40,000 transactions per hour, ~$5.10 per 1M
    assert cost.transactions_per_hour(40_000 / 3600) == pytest.approx(40_000)
    assert cost.cost_per_million(0.204, 1, 40_000 / 3600) == pytest.approx(5.10)
    assert cost.cost_per_million(1.0, 2, 100) == pytest.approx(2 / 360_000 * 1e6)
    assert cost.cost_per_million(1.0, 1, 0) is None


def test_sizing_and_autoscaling():
    assert cost.instances_needed(1000, 100, 0.5) == 20
    assert cost.instances_needed(1000, 100, 1.0) == 10
    assert cost.instances_needed(1001, 100, 1.0) == 11
    assert cost.instances_needed(10, 100, 1.0) == 1
    assert cost.autoscaling_target(100, 0.5) == 3000  # per instance per minute


def test_instances_and_the_autoscaling_target_carry_the_rates_interval():
    # 100 req/s wanted; measured 48 (±4) req/s per instance: 3 instances at 44 (and at 48), 2 at 52
    assert cost.instances_interval(100.0, [44.0, 52.0]) == [2, 3]
    assert cost.instances_interval(100.0, [88.0, 104.0], instance_count=2) == [2, 3]  # measured on 2 instances
    assert cost.instances_interval(100.0, [0.0, 52.0]) is None  # nothing bounds the fleet
    assert cost.instances_interval(100.0, None) is None
    assert cost.autoscaling_target_interval([44.0, 52.0], 0.5) == [1320.0, 1560.0]
    point = SustainablePoint.make(rps=48.0, rps_ci95=[44.0, 52.0])
    summary, _, _ = cost.cost_summary(point, instance_type="ml.c5.xlarge", price_per_hour=None, target_rps=100.0,
                                      safety_factor=0.5, prices=cost.load_prices())
    assert summary["instances_needed"] == 5 and summary["instances_needed_ci95"] == [4, 5]
    low, high = summary["autoscaling_target_invocations_per_instance_ci95"]
    assert low < summary["autoscaling_target_invocations_per_instance"] < high


def test_serverless_formula():
    # 2048 MB for 100.2 ms billed as 101 ms: 2 GB x 0.101 s x $0.00002
    assert cost.serverless_cost_per_inference(2048, 100.2, 0.00002) == pytest.approx(2 * 0.101 * 0.00002)


def test_bundled_prices_are_dated_and_sane():
    table = cost.load_prices()
    assert table.as_of and table.region == "us-east-1"
    c5 = table.lookup("ml.c5.xlarge")
    assert c5.usd_per_hour > 0 and c5.vcpus == 4 and c5.gpus == 0
    assert table.lookup("c5.xlarge") == c5  # "ml." prefix optional
    assert table.lookup("ml.g5.xlarge").gpus == 1
    assert table.serverless_usd_per_gb_second == pytest.approx(0.00002)


def test_user_price_file_overrides_entry_by_entry(tmp_path):
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"instances": {"ml.c5.xlarge": {"usd_per_hour": 0.5}, "ml.new.large": 1.25}}))
    table = cost.load_prices(f)
    assert table.lookup("ml.c5.xlarge").usd_per_hour == 0.5 and table.lookup("ml.c5.xlarge").vcpus == 4
    assert table.lookup("ml.new.large").usd_per_hour == 1.25
    assert table.lookup("ml.m5.large").source == "bundled prices.json"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"instances": {"x": {"usd_per_hour": "cheap"}}}))
    with pytest.raises(UsageError, match="numeric usd_per_hour"):
        cost.load_prices(bad)
    with pytest.raises(UsageError, match="does not exist"):
        cost.load_prices(tmp_path / "missing.json")


def test_cost_summary():
    table = cost.load_prices()
    point = SustainablePoint.make(rps=200.0, users=8)
    c, gaps, notes = cost.cost_summary(point, prices=table, instance_type="ml.c5.xlarge", instance_count=2,
                                      target_rps=1000, safety_factor=0.5, serverless_memory_mb=1024,
                                      serverless_duration_ms=20)
    assert gaps == [] and notes == []
    assert c["rps_per_instance"] == 100
    assert c["usd_per_million"] == pytest.approx(0.204 * 2 / (200 * 3600) * 1e6)
    assert c["instances_needed"] == 20 and c["instances_needed_no_headroom"] == 10
    assert c["autoscaling_target_invocations_per_instance"] == 3000
    assert c["serverless"]["usd_per_million"] == pytest.approx(1 * 0.02 * 0.00002 * 1e6)
    c, gaps, _ = cost.cost_summary(point, prices=table, instance_type="ml.unknown.huge")
    assert "usd_per_million" not in c and "no price for ml.unknown.huge" in gaps[0]
    c, gaps, _ = cost.cost_summary(point, prices=table, instance_type="ml.unknown.huge", price_per_hour=1.0)
    assert c["usd_per_million"] == pytest.approx(1 / 720_000 * 1e6) and gaps == []
    c, _, notes = cost.cost_summary(point, prices=table)
    assert "no instance type" in notes[0]
