"""Stop conditions: each fires with a one-line reason; bad thresholds are usage errors."""

import pytest

from sm_locust.errors import UsageError
from sm_locust.plateau.conditions import (
    ErrorRate,
    LatencySLO,
    MaxDuration,
    MaxInvocations,
    MaxInvocationsPerMinute,
    MaxRate,
    MaxUsers,
    ThroughputGain,
    check_all,
    constraint_violation,
)
from sm_locust.plateau.synthetic import synthetic_step


def series(rps, **kwargs):
    return [synthetic_step(i + 1, r, t_start=20.0 * i, **kwargs) for i, r in enumerate(rps)]


def test_throughput_gain_over_last_four_steps():
    gain = ThroughputGain()
    steps = series([100, 200, 400, 800, 1000, 1000, 1005, 1002])
    fired = [gain.check(steps[: n + 1]) for n in range(len(steps))]
    assert fired[:7] == [None] * 7
    assert fired[7] == "throughput gain < 5 % over 4 steps"
    assert gain.gain(steps) == pytest.approx(0.005)


def test_throughput_gain_ignores_a_noisy_dip():
    # a dip then recovery is not growth: compare against the best earlier step
    assert ThroughputGain().check(series([100, 1000, 900, 1010, 1000])) is not None


def test_latency_slo_any_percentile():
    step = synthetic_step(4, 100, p95_ms=48, p99_ms=90)
    assert LatencySLO(95, 40).check([step]) == "p95 48 ms > SLO 40 ms"
    assert LatencySLO("p99.9", 100).check([step]) is None
    assert LatencySLO("P99", 80).check([step]) == "p99 90 ms > SLO 80 ms"
    assert LatencySLO(95, 48).check([step]) is None  # at the SLO is within it


@pytest.mark.parametrize("pct,ms", [(120, 40), (0, 40), ("p100", 40), (95, 0), (95, "fast")])
def test_latency_slo_rejects_bad_values(pct, ms):
    with pytest.raises(UsageError):
        LatencySLO(pct, ms)


def test_percentile_120_message():
    with pytest.raises(UsageError, match="between 0 and 100"):
        LatencySLO(120, 40)


def test_error_rate():
    assert ErrorRate(0.05).check([synthetic_step(4, 100, error_rate=0.075)]) == "error rate 7.5 % > 5 %"
    assert ErrorRate(0.05).check([synthetic_step(4, 100, error_rate=0.05)]) is None
    with pytest.raises(UsageError):
        ErrorRate(5)


def test_limits():
    steps = series([100, 200, 300])  # 20 s each, 2000 + 4000 + 6000 requests
    assert MaxUsers(3).check(steps) == "reached max users 3"
    assert MaxUsers(4).check(steps) is None
    assert MaxRate(50).check(series([10, 20], mode="rate")) is None
    assert MaxDuration(60).check(steps) == "max duration 60 s reached"
    assert MaxDuration(61).check(steps) is None
    assert MaxInvocations(12000).check(steps) == "max invocations 12000 reached (12000 requests)"
    assert MaxInvocationsPerMinute(18000).check(steps) == "invocations 18000/min >= MaxInvocations 18000/min"
    assert MaxInvocationsPerMinute(18001).check(steps) is None
    for bad in (lambda: MaxUsers(0), lambda: MaxDuration(-1), lambda: MaxInvocations(1.5),
                lambda: ThroughputGain(window=1), lambda: ThroughputGain(min_gain=0)):
        with pytest.raises(UsageError):
            bad()


def test_combined_conditions():
    steps = series([100, 200], p95_ms=50, error_rate=0.1)
    conditions = [LatencySLO(95, 40), ErrorRate(0.05), MaxUsers(2)]
    fired = check_all(conditions, steps)
    assert [f.kind for f in fired] == ["constraint", "constraint", "limit"]
    assert constraint_violation(conditions, steps[-1]) == "p95 50 ms > SLO 40 ms"
