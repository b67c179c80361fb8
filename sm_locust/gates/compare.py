"""Two runs compared the way latency distributions allow: the change of a percentile (or of goodput)
with a 95 % interval from a moving-block bootstrap of each run's per-second samples (pure).

A run's seconds are serially correlated, so blocks of consecutive seconds are resampled, each
resample's percentile read by Locust's rule on the summed histograms (never a percentile of
percentiles). The change is the ratio new / baseline, bootstrapped on the log scale, its interval
widened as Hesterberg's expanded percentile interval and centred on the runs' own figures (methods
and sources: docs/facts.md). Each run is resampled on its own, `RESAMPLES` times, seeded, so the
same two folders always give the same line; each run's bootstrap variance is returned for
`decide.longer_run_factor_split`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from sm_locust.measure.uncertainty import row_percentiles, t_quantile

Z975 = NormalDist().inv_cdf(0.975)
RESAMPLES = 2000
MIN_SECONDS = 6  # fewer per-second samples: no interval (three blocks of two seconds at least; with two, the
# expanded interval's t(1) quantile makes it ~9x the bootstrap's spread: no answer at all)
CHUNK_CELLS = 4_000_000  # resamples x blocks per resample x buckets held in memory at once


def expansion(n: int) -> float:
    """How much wider than the plain percentile interval the expanded one is, for `n` seconds in
    blocks of `block_length(n)`: sqrt(k / (k - 1)) x t(k-1) / z with k = n // b independent blocks."""
    k = max(2, n // block_length(n))
    return math.sqrt(k / (k - 1)) * t_quantile(k - 1) / Z975


def block_length(n: int) -> int:
    """Seconds per block for `n` per-second samples: max(2, ceil(n^(1/3)))."""
    return max(2, math.ceil(n ** (1.0 / 3.0) - 1e-9))


@dataclass(frozen=True)
class Replicates:
    """Bootstrap replicates of one run's figure (NaN where a resample held no request), and the figure itself."""

    values: np.ndarray
    estimate: float | None
    seconds: int = 0  # per-second samples resampled


@dataclass(frozen=True)
class Change:
    """new / baseline for one figure: the point ratio, its 95 % interval, and each run's share of the
    interval's variance (on the log scale) for the longer-run estimate."""

    figure: str
    base: float | None
    new: float | None
    ratio: float | None
    low: float | None = None
    high: float | None = None
    var_base: float = 0.0
    var_new: float = 0.0

    @property
    def change(self) -> float | None:
        return None if self.ratio is None else self.ratio - 1.0

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    def change_bounds(self) -> tuple[float, float] | None:
        """(low, high) of the relative change (ratio - 1), None without an interval."""
        if self.low is None or self.high is None:
            return None
        return self.low - 1.0, self.high - 1.0


def _moving_blocks(matrix: np.ndarray, b: int) -> np.ndarray:
    """Sums of every run of `b` consecutive rows (n - b + 1 blocks)."""
    cumulative = np.vstack([np.zeros((1, matrix.shape[1]), dtype=matrix.dtype), np.cumsum(matrix, axis=0)])
    return cumulative[b:] - cumulative[:-b]


def _resampled_sums(blocks: np.ndarray, per_resample: int, rng: np.random.Generator, resamples: int):
    """Yield chunks of resampled sums: each resample adds `per_resample` blocks drawn with replacement."""
    width = blocks.shape[1]
    chunk = max(1, CHUNK_CELLS // max(1, per_resample * width))
    done = 0
    while done < resamples:
        size = min(chunk, resamples - done)
        picks = rng.integers(0, blocks.shape[0], size=(size, per_resample))
        yield blocks[picks].sum(axis=1)
        done += size


def percentile_replicates(hists: Sequence[Mapping[int, int]], pct: float, *, resamples: int = RESAMPLES,
                          seed: int = 0) -> Replicates:
    """Moving-block bootstrap replicates of the `pct` percentile of a run's per-second histograms."""
    n = len(hists)
    buckets = np.array(sorted({int(k) for h in hists for k in h}), dtype=np.int64)
    if n == 0 or buckets.size == 0:
        return Replicates(np.full(0, np.nan), None)
    column = {int(k): i for i, k in enumerate(buckets)}
    matrix = np.zeros((n, buckets.size), dtype=np.int64)
    for row, hist in enumerate(hists):
        for bucket, count in hist.items():
            matrix[row, column[int(bucket)]] += int(count)
    estimate = float(row_percentiles(matrix.sum(axis=0, keepdims=True), buckets, pct)[0])
    if n < MIN_SECONDS:
        return Replicates(np.full(0, np.nan), estimate)
    b = block_length(n)
    blocks = _moving_blocks(matrix, b)
    rng = np.random.default_rng(seed)
    parts = [row_percentiles(sums, buckets, pct) for sums in _resampled_sums(blocks, math.ceil(n / b), rng,
                                                                                  resamples)]
    return Replicates(np.concatenate(parts), estimate, n)


def rate_replicates(counts: Sequence[float], intervals: Sequence[float], *, resamples: int = RESAMPLES,
                    seed: int = 0) -> Replicates:
    """Moving-block bootstrap replicates of a rate: sum(counts) / sum(intervals) over resampled blocks
    of seconds (goodput: successful invocations per second)."""
    n = len(counts)
    if n == 0 or sum(intervals) <= 0:
        return Replicates(np.full(0, np.nan), None)
    matrix = np.column_stack([np.asarray(counts, dtype=float), np.asarray(intervals, dtype=float)])
    estimate = float(matrix[:, 0].sum() / matrix[:, 1].sum())
    if n < MIN_SECONDS:
        return Replicates(np.full(0, np.nan), estimate)
    b = block_length(n)
    blocks = _moving_blocks(matrix, b)
    rng = np.random.default_rng(seed)
    parts = []
    for sums in _resampled_sums(blocks, math.ceil(n / b), rng, resamples):
        with np.errstate(divide="ignore", invalid="ignore"):
            parts.append(np.where(sums[:, 1] > 0, sums[:, 0] / sums[:, 1], np.nan))
    return Replicates(np.concatenate(parts), estimate, n)


def _log_variance(values: np.ndarray) -> tuple[np.ndarray, float] | None:
    """The finite, positive replicates' logs and their variance; None when too few are usable."""
    usable = values[np.isfinite(values) & (values > 0)]
    if usable.size < max(10, values.size // 2):
        return None
    logs = np.log(usable)
    return logs, float(np.var(logs, ddof=1))


def compare(figure: str, base: Replicates, new: Replicates, *, base_value: float | None = None,
            new_value: float | None = None) -> Change:
    """The change new / base with its 95 % interval (`figure`: 'p95', 'goodput', ...).

    `base_value` / `new_value`: the runs' figures as every surface shows them (summary.json's totals);
    without them the replicates' own estimates. The bootstrap's spread around the estimates from the
    per-second samples is applied to these figures (they agree when the timeline holds every request)."""
    b_value = base_value if base_value is not None else base.estimate
    n_value = new_value if new_value is not None else new.estimate
    if not b_value or n_value is None or b_value <= 0 or n_value < 0:
        return Change(figure, b_value, n_value, None)
    ratio = n_value / b_value
    b_logs, n_logs = _log_variance(base.values), _log_variance(new.values)
    if b_logs is None or n_logs is None or not base.estimate or not new.estimate or n_value <= 0:
        return Change(figure, b_value, n_value, ratio)
    size = min(b_logs[0].size, n_logs[0].size)
    log_ratios = n_logs[0][:size] - b_logs[0][:size]  # independent replicates, paired in draw order
    centre = math.log(new.estimate / base.estimate)
    low_q, mid, high_q = (float(q) for q in np.quantile(log_ratios, [0.025, 0.5, 0.975]))
    widen = expansion(min(base.seconds, new.seconds))
    low = ratio * math.exp(mid + (low_q - mid) * widen - centre)
    high = ratio * math.exp(mid + (high_q - mid) * widen - centre)
    scale = widen ** 2  # the variances the longer-run estimate splits, on the interval's scale
    return Change(figure, b_value, n_value, ratio, min(low, ratio), max(high, ratio), b_logs[1] * scale,
                  n_logs[1] * scale)
