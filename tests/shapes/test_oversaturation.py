"""`--stop-when-oversaturated`: the rule (shapes/saturation.py) on synthetic series, the shapes' use of it,
and an open-loop run against an endpoint that cannot keep up."""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

import pytest

from sm_locust.endpoint.llm import LlmConfig
from sm_locust.errors import UsageError
from sm_locust.measure.timeline import Second
from sm_locust.shapes.base import SmLocustShape
from sm_locust.shapes.saturation import MAX_WINDOW_S, MIN_GROWTH_REQUESTS, WINDOW_S, judge, slope_ci
from sm_locust.shapes.settings import ShapeSettings
from tests.conftest import run_cli


def poisson(rng: random.Random, rate: float) -> int:
    """Events in one second of a Poisson process (sums of exponential gaps)."""
    count, t = 0, rng.expovariate(rate)
    while t < 1.0:
        count, t = count + 1, t + rng.expovariate(rate)
    return count


def series(arrivals: float, completions, seconds: int = WINDOW_S, seed: int = 1):
    """(sent, completed, intervals): Poisson sends at `arrivals`/s, completions at `completions(i)`/s."""
    rng = random.Random(seed)
    sent = [poisson(rng, arrivals) for _ in range(seconds)]
    done = [poisson(rng, completions(i)) for i in range(seconds)]
    return sent, done, [1.0] * seconds


@pytest.mark.parametrize("seed", range(5))
def test_an_endpoint_that_keeps_up_is_not_oversaturated(seed):
    sent, _, intervals = series(10.0, lambda i: 10.0, seconds=MAX_WINDOW_S, seed=seed)
    done = [sent[0]] + sent[:-1]  # every request answered a second later
    verdict = judge(sent, done, intervals)
    assert verdict is not None and not verdict.oversaturated


@pytest.mark.parametrize("seed", range(5))
def test_a_backlog_growing_at_flat_completions_is(seed):
    verdict = judge(*series(10.0, lambda i: 7.0, seconds=MAX_WINDOW_S, seed=seed))
    assert verdict is not None and verdict.oversaturated and verdict.seconds == MAX_WINDOW_S
    assert verdict.growth.low * verdict.seconds >= MIN_GROWTH_REQUESTS and verdict.growth.contains(3.0)
    assert verdict.reason().startswith("over-saturated: the requests waiting grew by [")


def test_a_heavy_overload_is_seen_in_the_shortest_window():
    verdicts = [judge(*series(10.0, lambda i: 4.0, seed=seed)) for seed in range(5)]
    assert all(v is not None and v.seconds == WINDOW_S and v.oversaturated for v in verdicts)


def test_a_backlog_growing_while_completions_rise_is_an_endpoint_warming_up():
    verdict = judge(*series(10.0, lambda i: 1.0 + 8.0 * i / WINDOW_S, seed=3))
    assert verdict is not None and verdict.trend.low > 0.1
    assert verdict is not None and verdict.growth.low > 1.0  # the backlog grows ...
    assert not verdict.oversaturated  # ... but completions rise: not saturated


def test_too_little_growth_or_too_few_seconds_decide_nothing():
    sent = [10] * WINDOW_S
    slow = [10 if i % 5 else 9 for i in range(WINDOW_S)]  # 6 requests more in 30 s: under MIN_GROWTH_REQUESTS
    verdict = judge(sent, slow, [1.0] * WINDOW_S)
    assert verdict is not None and not verdict.oversaturated
    assert judge(sent[1:], slow[1:], [1.0] * (WINDOW_S - 1)) is None
    with pytest.raises(ValueError):
        judge(sent, slow[1:], [1.0] * WINDOW_S)


def test_the_trend_interval():
    assert slope_ci([1.0, 2.0, 3.0, 4.0]).as_list() == [1.0, 1.0]  # a straight line: no width
    noisy = slope_ci([5.0, 7.0, 4.0, 6.0, 5.0, 7.0, 4.0, 6.0])
    assert noisy.contains(0.0) and slope_ci([1.0, 2.0]).known is False


def seconds_of(sent, done, spawning_first: int = 0):
    return [Second(t=1000.0 + i, users=10, spawning=i < spawning_first, requests=c, failures=0, sent=s)
            for i, (s, c) in enumerate(zip(sent, done, strict=True))]


def test_the_shapes_judge_the_last_seconds_with_sends_when_asked():
    sent, done, _ = series(10.0, lambda i: 4.0, seconds=40)
    on = SimpleNamespace(settings=ShapeSettings(stop_when_oversaturated=True))
    off = SimpleNamespace(settings=ShapeSettings())
    assert SmLocustShape.oversaturated(on, seconds_of(sent, done)).startswith("over-saturated")
    assert SmLocustShape.oversaturated(off, seconds_of(sent, done)) is None
    assert SmLocustShape.oversaturated(on, seconds_of(sent, done, spawning_first=15)) is None  # 25 s since: too few
    assert SmLocustShape.oversaturated(on, seconds_of(sent, done, spawning_first=5)) is not None
    closed = [Second(t=1000.0 + i, users=4, spawning=False, requests=7, failures=0) for i in range(40)]
    assert SmLocustShape.oversaturated(on, closed) is None  # closed loop: no sends counted, nothing to judge


def test_the_option_needs_an_open_loop_run():
    with pytest.raises(UsageError, match="--stop-when-oversaturated judges an open-loop run"):
        ShapeSettings(stop_when_oversaturated=True).check("plateau")
    ShapeSettings(stop_when_oversaturated=True, target_rps=5.0).check("open")


@pytest.mark.e2e
def test_an_open_run_past_the_endpoints_capacity_stops_saying_why(endpoint_factory, tmp_path):
    # one sequence at a time, ~10 x 20 ms per answer: about 5 answers/s against 15 sent a second
    ep = endpoint_factory(llm=LlmConfig(max_sequences=1, step_ms=20.0, step_ms_per_seq=0.0,
                                        prefill_ms_per_token=0.0))
    out = tmp_path / "run"
    result = run_cli("run", "--endpoint-name", "llm", "--endpoint-url", ep.url, "--prompts", "synthetic:10",
                     "--max-new-tokens", "10", "--target-rps", "15", "--stop-when-oversaturated", "true",
                     "-t", "120s", "--out", str(out), timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "stopped: over-saturated: the requests waiting grew by" in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stop_reason"].startswith("over-saturated") and summary["duration_s"] < 120  # before -t ended
