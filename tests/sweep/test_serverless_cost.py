"""Serverless cost and the break-even against a real-time instance, with hand-computed values."""

from __future__ import annotations

import json

import pytest

from sm_locust.errors import UsageError
from sm_locust.sweep.serverless.collect import duration_interval
from sm_locust.sweep.serverless.cost import (
    GB,
    break_even_rps,
    configuration_cost,
    load_serverless_prices,
    monthly_realtime_usd,
    monthly_serverless_usd,
    request_cost,
    requests_per_month,
)


def test_the_bundled_table_is_dated_approximate_and_linear_in_memory():
    prices = load_serverless_prices()
    assert (prices.region, prices.as_of) == ("us-east-1", "2025-06")
    assert prices.usd_per_second_by_memory_mb == {1024: 0.00002, 2048: 0.00004, 3072: 0.00006, 4096: 0.00008,
                                                  5120: 0.0001, 6144: 0.00012}
    assert prices.usd_per_gb_processed == 0.016
    assert "approximate us-east-1" in prices.label()


def test_cost_per_1m_carries_the_billed_durations_interval():
    prices = load_serverless_prices()
    # ModelLatency 61.2 ms; the client's warm mean 60 ms [57, 66]: the billed duration's interval is the same
    # share of it, [58.14, 67.32]; each request is billed rounded up to the ms, so the mean billed duration
    # lies between 58 (the low bound rounded down) and 68 ms (the high bound rounded up)
    duration = duration_interval(61.2, 60.0, [57.0, 66.0])
    assert duration == pytest.approx([58.14, 67.32])
    cost = configuration_cost(4096, 61.2, "ModelLatency", 0.0, 0.0, prices, duration_ci95=duration)
    assert cost.cost_per_1m_ci95 == pytest.approx([0.058 * 0.00008 * 1e6, 0.068 * 0.00008 * 1e6])
    # a narrow interval inside one billed ms still spans the rounding: 4096 MB at 32.1-32.9 ms and 2048 MB at
    # 64-66 ms cost the same compute, and the few bytes' difference in data does not separate them
    fast = configuration_cost(4096, 32.5, "x", 1000.0, 200.0, prices, duration_ci95=[32.1, 32.9])
    slow = configuration_cost(2048, 64.5, "x", 1000.0, 100.0, prices, duration_ci95=[63.2, 65.8])
    assert fast.cost_per_1m_ci95[0] < slow.cost_per_1m_ci95[1] and slow.cost_per_1m_ci95[0] < fast.cost_per_1m_ci95[1]
    assert cost.cost_per_1m_ci95[0] <= cost.cost_per_1m <= cost.cost_per_1m_ci95[1]
    assert cost.as_dict()["cost_per_1m_ci95"] == cost.cost_per_1m_ci95
    assert duration_interval(61.2, 60.0, None) is None
    assert configuration_cost(4096, 61.2, "x", 0.0, 0.0, prices).cost_per_1m_ci95 is None


def test_request_cost_by_hand():
    prices = load_serverless_prices()
    # 4096 MB, 61.2 ms -> billed 62 ms: 0.062 s x $0.00008/s = $0.00000496
    # data: 1,000 B in + 200 B out = 1,200 B / 2^30 x $0.016 = $0.0000000178814
    cost = request_cost(4096, 61.2, prices, bytes_in=1000, bytes_out=200)
    assert cost.billed_ms == 62
    assert cost.compute_usd == pytest.approx(4.96e-6)
    assert cost.data_usd == pytest.approx(1200 / 1073741824 * 0.016)
    assert cost.per_1m == pytest.approx(4.96 + 0.0178814, rel=1e-6)
    # exactly 30 ms stays 30 ms; 2048 MB costs half per second
    assert request_cost(2048, 30.0, prices).usd == pytest.approx(0.030 * 0.00004)
    assert GB == 1073741824


def test_break_even_by_hand():
    # $4.97788 per 1M against ml.c5.large at $0.119/h: 0.119 / (3600 x 4.97788e-6) = 6.6405 req/s
    usd = 4.96e-6 + 1200 / 1073741824 * 0.016
    rate = break_even_rps(usd, 0.119)
    assert rate == pytest.approx(0.119 / (3600 * usd))
    assert rate == pytest.approx(6.6405, abs=1e-3)
    assert requests_per_month(rate) == pytest.approx(rate * 3600 * 730)  # ~17.45 M a month
    assert requests_per_month(rate) == pytest.approx(17.451e6, rel=1e-3)
    # at the break-even both cost the same per month; below it serverless is cheaper, above it real-time
    assert monthly_serverless_usd(rate, usd) == pytest.approx(monthly_realtime_usd(rate, 0.119)) == pytest.approx(86.87)
    assert monthly_serverless_usd(rate / 2, usd) < monthly_realtime_usd(rate / 2, 0.119)
    assert monthly_serverless_usd(rate * 2, usd) > monthly_realtime_usd(rate * 2, 0.119)
    # an instance that serves only 5 req/s cannot carry 6.64 req/s: serverless is cheaper at any rate
    assert break_even_rps(usd, 0.119, capacity_rps=5.0) is None
    assert break_even_rps(usd, 0.119, capacity_rps=50.0) == pytest.approx(rate)
    assert monthly_realtime_usd(12.0, 0.119, capacity_rps=5.0) == pytest.approx(3 * 0.119 * 730)
    assert break_even_rps(0.0, 0.119) is None


def test_a_user_price_file_overrides_entry_by_entry(tmp_path):
    path = tmp_path / "sls.json"
    path.write_text(json.dumps({"region": "eu-west-1", "as_of": "2025-09",
                                "usd_per_second_by_memory_mb": {"2048": 0.000045}}))
    prices = load_serverless_prices(path)
    assert prices.per_second(2048) == 0.000045 and prices.per_second(4096) == 0.00008
    assert prices.usd_per_gb_processed == 0.016 and prices.region == "eu-west-1"
    path.write_text(json.dumps({"usd_per_second_by_memory_mb": {"big": 1}}))
    with pytest.raises(UsageError, match="'big' is not a memory size"):
        load_serverless_prices(path)
    with pytest.raises(UsageError, match="does not exist"):
        load_serverless_prices(tmp_path / "missing.json")
    with pytest.raises(UsageError, match="no serverless price for 1536 MB"):
        load_serverless_prices().per_second(1536)
