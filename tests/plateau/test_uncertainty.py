"""95 % intervals (measure/uncertainty.py): coverage of the truth on synthetic series, and the rules."""

import math

import numpy as np
import pytest

from sm_locust.measure.steady import histogram_percentile, measure_step, window_intervals
from sm_locust.measure.timeline import Second
from sm_locust.measure.uncertainty import (
    UNKNOWN,
    Interval,
    batch_count,
    batch_index,
    percentile_ci,
    percentile_cis,
    rate_ci,
    t_quantile,
)

RUNS = 200  # synthetic runs per coverage test (each seeded: the test is deterministic)


def ar1(rng, n, phi, sd, mean):
    """`n` per-second counts: mean + an AR(1) process of stationary sd `sd` (burn-in dropped), >= 0."""
    noise = rng.normal(0.0, sd * math.sqrt(1.0 - phi ** 2), n + 100)
    level = np.zeros(n + 100)
    for i in range(1, n + 100):
        level[i] = phi * level[i - 1] + noise[i]
    return np.maximum(0.0, np.round(mean + level[100:]))


def locust_bucket(values):
    """Locust's response-time rounding (stats.py: 2 significant digits from 100 ms up, 1 ms below)."""
    v = np.asarray(values)
    return np.where(v < 100, np.round(v), np.where(v < 1000, np.round(v, -1), np.round(v, -2))).astype(int)


def hists_of(rng, n, per_second, mu, sigma, level=None):
    out = []
    for i in range(n):
        shift = 0.0 if level is None else level[i]
        values, counts = np.unique(locust_bucket(np.exp(mu + shift + sigma * rng.normal(size=per_second))),
                                   return_counts=True)
        out.append(dict(zip(values.tolist(), counts.tolist(), strict=True)))
    return out


def coverage(intervals, truth):
    return sum(iv.contains(truth) for iv in intervals) / len(intervals)


# -- coverage: the interval holds the true value in ~95 % of runs ---------------------------------

@pytest.mark.parametrize("n", [24, 120])
def test_rate_interval_covers_the_true_mean_of_iid_poisson_counts(n):
    intervals = [rate_ci(np.random.default_rng(seed).poisson(100, n), [1.0] * n) for seed in range(RUNS)]
    assert 0.90 <= coverage(intervals, 100.0) <= 0.99


@pytest.mark.parametrize("n,phi", [(24, 0.5), (120, 0.5), (120, 0.7)])
def test_rate_interval_covers_the_true_mean_of_autocorrelated_counts(n, phi):
    intervals = [rate_ci(ar1(np.random.default_rng(seed), n, phi, 10.0, 100.0), [1.0] * n) for seed in range(RUNS)]
    assert coverage(intervals, 100.0) >= 0.90


def naive_interval(counts):
    """The textbook interval that takes seconds as independent (what batch means replaces)."""
    x = np.asarray(counts, dtype=float)
    half = t_quantile(len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
    return Interval(x.mean() - half, x.mean() + half)


def test_batch_means_widen_where_seconds_are_correlated_and_cover_where_the_naive_interval_does_not():
    series = [ar1(np.random.default_rng(seed), 120, 0.7, 10.0, 100.0) for seed in range(RUNS)]
    batch = [rate_ci(x, [1.0] * len(x)) for x in series]
    naive = [naive_interval(x) for x in series]
    assert coverage(naive, 100.0) < 0.85 <= 0.90 <= coverage(batch, 100.0)
    assert np.mean([b.half_width for b in batch]) > 1.5 * np.mean([n.half_width for n in naive])


def test_rate_intervals_shrink_as_the_window_grows():
    widths = {n: np.mean([rate_ci(np.random.default_rng(s).poisson(100, n), [1.0] * n).half_width
                          for s in range(50)]) for n in (16, 64, 256)}
    assert widths[16] > widths[64] > widths[256] > 0


@pytest.mark.parametrize("pct,z", [(50.0, 0.0), (95.0, 1.6448536), (99.0, 2.3263479)])
def test_percentile_interval_covers_the_true_percentile_of_iid_latencies(pct, z):
    mu, sigma = math.log(80.0), 0.3
    truth = int(locust_bucket([math.exp(mu + sigma * z)])[0])
    intervals = [percentile_ci(hists_of(np.random.default_rng(seed), 24, 50, mu, sigma), pct, seed=seed)
                 for seed in range(RUNS)]
    assert coverage(intervals, truth) >= 0.90


def test_percentile_interval_covers_the_p95_of_latencies_with_an_autocorrelated_level():
    # log-latency = mu + an AR(1) level (phi 0.5, sd 0.15) + noise (sd 0.3): stationary sd sqrt(0.3^2 + 0.15^2)
    mu, sigma, level_sd = math.log(80.0), 0.3, 0.15
    truth = int(locust_bucket([math.exp(mu + math.hypot(sigma, level_sd) * 1.6448536)])[0])
    intervals = []
    for seed in range(RUNS):
        rng = np.random.default_rng(seed)
        level = ar1(rng, 60, 0.5, level_sd * 1000, 0.0) / 1000  # ar1 rounds: scale up, then back
        intervals.append(percentile_ci(hists_of(rng, 60, 50, mu, sigma, level), 95.0, seed=seed))
    assert coverage(intervals, truth) >= 0.90


# -- the rules --------------------------------------------------------------------------------------

def test_too_few_samples_give_no_interval():
    assert rate_ci([10, 11, 9], [1.0, 1.0, 1.0]) == UNKNOWN
    assert percentile_ci([{10: 5}] * 3, 95.0) == UNKNOWN
    assert percentile_ci([{}] * 10, 95.0) == UNKNOWN  # no requests
    assert UNKNOWN.as_list() is None and UNKNOWN.half_width is None and not UNKNOWN.known
    assert not UNKNOWN.contains(1.0) and not UNKNOWN.straddles(1.0)


def test_batches_grow_with_the_window_and_are_cut_by_duration():
    assert [batch_count(n) for n in (3, 4, 8, 16, 24, 100, 604_800)] == [0, 2, 4, 4, 4, 10, 777]
    assert batch_count(24, 1 / 3) == 8  # percentile blocks: ~n^(1/3) samples
    # ten 1-s seconds then a 10-s merged block: 5 batches of 4 s; the block (its midpoint at 15 s) is
    # one batch, never split, and the batch it leaves empty is dropped
    index, k = batch_index([1.0] * 10 + [10.0])
    assert k == 4 and list(index) == [0] * 4 + [1] * 4 + [2] * 2 + [3]


def test_the_rate_is_the_windows_ratio_and_merged_blocks_count_by_their_duration():
    counts = [100, 104, 96, 101, 99, 100, 98, 102]
    seconds = rate_ci(counts, [1.0] * 8)
    assert seconds.contains(sum(counts) / 8) and seconds.low < 100 < seconds.high
    # the same requests in blocks of 2 s: the same window rate, an interval from 4 batches
    blocks = rate_ci([a + b for a, b in zip(counts[::2], counts[1::2], strict=True)], [2.0] * 4)
    assert (blocks.low + blocks.high) / 2 == pytest.approx(100.0)
    assert rate_ci([5] * 8, [1.0] * 8) == Interval(5.0, 5.0)  # no spread, no width


def test_a_percentile_interval_contains_its_own_figure_and_is_seeded():
    rng = np.random.default_rng(7)
    hists = hists_of(rng, 30, 40, math.log(60.0), 0.4)
    merged = {}
    for h in hists:
        for b, c in h.items():
            merged[b] = merged.get(b, 0) + c
    cis = percentile_cis(hists, (50.0, 95.0, 99.0), seed=3)
    for pct, iv in cis.items():
        assert iv.contains(histogram_percentile(merged, pct))
    assert cis[50.0].high <= cis[99.0].high
    assert percentile_cis(hists, (95.0,), seed=3)[95.0] == cis[95.0]  # same seed, same interval
    assert percentile_ci(hists, 95.0, seed=3) == cis[95.0]


def test_t_quantiles_match_the_table_and_the_normal_limit():
    assert t_quantile(1) == pytest.approx(12.706, abs=1e-3) and t_quantile(30) == pytest.approx(2.042, abs=1e-3)
    assert t_quantile(31) < t_quantile(30) and t_quantile(40) == pytest.approx(2.021, abs=1e-3)
    assert t_quantile(10_000) == pytest.approx(1.960, abs=1e-3)


def test_interval_from_summary_json_and_straddling():
    iv = Interval.from_list([112, 131])
    assert iv.as_list() == [112.0, 131.0] and iv.half_width == 9.5
    assert iv.straddles(120) and not iv.straddles(140)
    assert Interval.from_list(None) == UNKNOWN and Interval.from_list(["a", 1]) == UNKNOWN


def test_a_step_carries_the_intervals_of_its_steady_window():
    rng = np.random.default_rng(1)
    seconds = [Second(t=float(i), users=8, spawning=False, requests=int(n), failures=int(n) // 50,
                      hist={20: int(n) - 5, 40: 5}) for i, n in enumerate(rng.poisson(100, 30), start=1)]
    step = measure_step(seconds)
    assert step.ci95 == window_intervals(step.window)  # the window is the steady one: warm-up dropped
    assert len(step.window) == 24 and step.ci95["rps"].contains(step.rps)
    assert step.ci95["goodput_rps"].contains(step.goodput_rps) and step.ci95["p95_ms"].contains(step.p95_ms)
    assert step.as_dict()["ci95"]["rps"] == step.ci95["rps"].as_list()
