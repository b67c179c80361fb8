"""Steady-state figures of one step: warm-up, own-histogram percentiles, stability, client-bound, splitting."""

import ast
import pathlib

import pytest

from sm_locust.errors import UsageError
from sm_locust.measure.steady import (
    histogram_percentile,
    measure_step,
    measure_timeline,
    parse_percentile,
    split_steps,
    steady_window,
)
from sm_locust.measure.timeline import Second


def sec(t, users=4, requests=100, failures=0, hist=None, spawning=False, cpu=None, rate=None):
    return Second(t=float(t), users=users, spawning=spawning, requests=requests, failures=failures,
                  hist=hist if hist is not None else {10: requests}, client_cpu_pct=cpu, target_rate=rate)


def test_plateau_package_is_pure():
    banned = {"locust", "boto3", "botocore", "gevent", "psutil", "requests", "urllib3"}
    package = pathlib.Path(__file__).resolve().parents[2] / "sm_locust" / "plateau"
    assert package.is_dir()
    for path in package.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not {n.split(".")[0] for n in names} & banned, (path, names)


def test_percentile_follows_locust_rule():
    hist = {10: 50, 20: 45, 100: 5}
    assert histogram_percentile(hist, 50) == 20  # Locust: 50 of 100 at <= 10 is not "more than half"
    assert histogram_percentile(hist, 95) == 100
    assert histogram_percentile(hist, 90) == 20
    assert histogram_percentile({}, 95) is None


@pytest.mark.parametrize("value,expected", [(95, 95.0), ("p99.9", 99.9), ("P50", 50.0), ("90", 90.0)])
def test_parse_percentile(value, expected):
    assert parse_percentile(value) == expected


@pytest.mark.parametrize("value", [120, 0, 100, "p", "fast", -5])
def test_parse_percentile_rejects(value):
    with pytest.raises(UsageError):
        parse_percentile(value)


def test_warmup_and_ramp_are_dropped():
    seconds = [sec(0, spawning=True, requests=3)] + [sec(i) for i in range(1, 21)]
    assert len(steady_window(seconds)) == 16  # 20 settled seconds, 20 % warm-up
    assert len(steady_window(seconds, warmup_s=6)) == 14
    assert steady_window(seconds, warmup_fraction=0.0)[0].t == 1.0
    with pytest.raises(UsageError):
        steady_window(seconds, warmup_fraction=1.5)


def test_step_figures_come_from_its_own_histogram():
    warm = [sec(i, requests=10, hist={500: 10}) for i in range(4)]  # slow warm-up must not count
    steady = [sec(i, requests=100, failures=5, hist={10: 90, 40: 10}, cpu=30 + i) for i in range(4, 20)]
    m = measure_step(warm + steady)
    assert m.rps == pytest.approx(100)
    assert m.requests == 1600 and m.failures == 80 and m.error_rate == pytest.approx(0.05)
    assert m.p50_ms == 10 and m.p95_ms == 40 and m.percentile(99.9) == 40
    assert m.total_requests == 1640
    assert m.client_cpu_pct == pytest.approx(41.5) and m.client_cpu_max == 49
    assert m.stable and not m.client_bound
    assert m.load == 4 and m.users == 4 and m.duration_s == 16
    assert m.as_dict()["percentiles_ms"]["p99.9"] == 40


def test_stability_three_windows_within_ten_percent():
    flat = [sec(i, requests=100) for i in range(30)]
    assert measure_step(flat, warmup_fraction=0).stable
    sagging = [sec(i, requests=100 if i < 20 else 70) for i in range(30)]
    m = measure_step(sagging, warmup_fraction=0)
    assert not m.stable and m.spread > 0.10 and "between sub-windows" in m.unstable_reason
    short = measure_step([sec(i) for i in range(6)], warmup_fraction=0)
    assert not short.stable and "too short" in short.unstable_reason


def test_lumpy_worker_reports_still_stable():
    # a master sees worker reports every 3 s: 0, 0, 300, 0, 0, 300 ...
    lumpy = [sec(i, requests=300 if i % 3 == 2 else 0, hist={10: 300} if i % 3 == 2 else {}) for i in range(27)]
    m = measure_step(lumpy, warmup_fraction=0)
    assert m.stable and m.rps == pytest.approx(100)


def test_client_bound_by_cpu_and_by_open_loop_shortfall():
    hot = measure_step([sec(i, cpu=95) for i in range(20)])
    assert hot.client_bound and "client CPU 95 %" in hot.client_bound_reason
    short = measure_step([sec(i, requests=80, rate=100.0) for i in range(20)], mode="rate")
    assert short.load == 100 and short.intended_rps == 100
    assert short.client_bound and "80 % of the intended" in short.client_bound_reason
    kept_up = measure_step([sec(i, requests=80, rate=100.0) for i in range(20)], mode="rate", sent_rps=99.0)
    assert not kept_up.client_bound  # sends on time: the endpoint, not the generator, fell short
    late = measure_step([sec(i, rate=100.0) for i in range(20)], mode="rate", late_fraction=0.2)
    assert late.client_bound and "late" in late.client_bound_reason


def test_split_timeline_into_steps():
    timeline = (
        [sec(i, users=1) for i in range(5)]
        + [sec(5, users=2, spawning=True)]
        + [sec(i, users=2) for i in range(6, 12)]
        + [sec(12, users=4)]
    )
    steps = split_steps(timeline)
    assert [len(s) for s in steps] == [5, 6, 1]
    assert [s[0].users for s in steps] == [1, 2, 4]
    rated = [sec(i, rate=10.0) for i in range(3)] + [sec(i, rate=20.0) for i in range(3, 6)] + [sec(6)]
    assert [len(s) for s in split_steps(rated, mode="rate")] == [3, 3]
    assert [m.load for m in measure_timeline(timeline)] == [1, 2, 4]


def test_bad_step_inputs():
    with pytest.raises(UsageError, match="empty step"):
        measure_step([])
    with pytest.raises(UsageError, match="mode"):
        measure_step([sec(0)], mode="threads")
