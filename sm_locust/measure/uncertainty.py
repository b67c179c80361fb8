"""95 % confidence intervals of a window's figures, from its per-second samples (pure, seeded).

Per-second samples are serially correlated, so both methods work on consecutive batches (docs/facts.md,
"Confidence intervals", with sources). Rates (`rate_ci`) by non-overlapping batch means: the
window's ratio sum(counts) / sum(durations), Student's t over about sqrt(n)-sample batches cut by
duration. Percentiles (`percentile_ci`, `percentile_cis`) by a block bootstrap over blocks of about
n^(1/3) samples, `RESAMPLES` seeded replicates read by Locust's rule, widened to contain the
window's own figure. Fewer than `MIN_SAMPLES` samples give `Interval(None, None)` ("n/a"): none is
invented.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

LEVEL = 0.95  # every interval is a 95 % one
RESAMPLES = 2000  # bootstrap replicates of a percentile
MIN_SAMPLES = 4  # fewer samples: no interval (two batches of two is the least batch means can use)
MIN_BATCH = 2
BATCH_POWER = 0.5  # rates: batches of ~sqrt(n) samples
BLOCK_POWER = 1.0 / 3.0  # percentiles: bootstrap blocks of ~n^(1/3) samples

# Student's t quantile at 0.975 for 1..30 degrees of freedom (the usual table); beyond, the
# Cornish-Fisher expansion below is exact to 1e-5.
_T975 = (12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281, 2.2010, 2.1788, 2.1604,
         2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860, 2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555,
         2.0518, 2.0484, 2.0452, 2.0423)


@dataclass(frozen=True)
class Interval:
    """A 95 % interval [low, high]; both None when it cannot be computed ("n/a")."""

    low: float | None
    high: float | None

    @property
    def known(self) -> bool:
        return self.low is not None and self.high is not None

    def as_list(self, digits: int = 3) -> list[float] | None:
        """`[low, high]` rounded for summary.json, or None (JSON null) when unknown."""
        if self.low is None or self.high is None:
            return None
        return [round(self.low, digits), round(self.high, digits)]

    @classmethod
    def from_list(cls, value: object) -> Interval:
        """summary.json's `[low, high]` (or null) back into an Interval."""
        if isinstance(value, (list, tuple)) and len(value) == 2 and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value):
            return cls(float(value[0]), float(value[1]))
        return UNKNOWN

    def contains(self, x: float) -> bool:
        """low <= x <= high (False when unknown)."""
        return self.low is not None and self.high is not None and self.low <= x <= self.high

    @property
    def half_width(self) -> float | None:
        return None if self.low is None or self.high is None else (self.high - self.low) / 2.0

    def straddles(self, limit: float) -> bool:
        """The limit lies inside the interval: the data cannot tell which side of it the figure is on.
        An unknown interval straddles nothing (there is no interval to judge with; callers that need
        one check `known`)."""
        return self.contains(limit)


UNKNOWN = Interval(None, None)


def t_quantile(df: int) -> float:
    """Student's t 0.975 quantile with `df` degrees of freedom (df >= 1)."""
    if df < 1:
        raise ValueError(f"degrees of freedom {df} must be >= 1")
    if df <= len(_T975):
        return _T975[df - 1]
    z = NormalDist().inv_cdf(0.5 + LEVEL / 2.0)
    v = float(df)
    g1 = (z ** 3 + z) / 4.0
    g2 = (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96.0
    g3 = (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384.0
    g4 = (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / 92160.0
    return z + g1 / v + g2 / v ** 2 + g3 / v ** 3 + g4 / v ** 4


def batch_count(n: int, power: float = BATCH_POWER) -> int:
    """How many batches `n` samples are cut into: batches of max(2, min(ceil(n^power), n // 4))
    samples (0: too few for an interval)."""
    if n < MIN_SAMPLES:
        return 0
    size = max(MIN_BATCH, min(math.ceil(n ** power - 1e-9), n // 4))
    return n // size


def batch_index(intervals: Sequence[float] | np.ndarray, power: float = BATCH_POWER) -> tuple[np.ndarray, int]:
    """(batch of each sample, number of batches): consecutive samples cut into `batch_count(n)`
    batches of about equal DURATION (each sample goes to the batch its midpoint falls in); empty
    batches (a merged block longer than a batch) are dropped and the rest renumbered."""
    d = np.asarray(intervals, dtype="float64")
    k = batch_count(len(d), power)
    total = float(d.sum()) if len(d) else 0.0
    if k == 0 or not total > 0:
        return np.zeros(len(d), dtype="int64"), 0
    mids = np.cumsum(d) - d / 2.0
    raw = np.minimum((mids * k / total).astype("int64"), k - 1)
    used, index = np.unique(raw, return_inverse=True)
    return index.reshape(-1), len(used)


def rate_ci(counts: Sequence[float], intervals: Sequence[float]) -> Interval:
    """95 % interval of sum(counts) / sum(intervals) (events per second) by batch means (module doc).

    `counts[i]` events happened in sample i, which lasted `intervals[i]` seconds."""
    c = np.asarray(counts, dtype="float64")
    d = np.asarray(intervals, dtype="float64")
    if len(c) != len(d):
        raise ValueError(f"{len(c)} counts but {len(d)} intervals")
    index, k = batch_index(d)
    if k < 2:
        return UNKNOWN
    batch_c = np.bincount(index, weights=c, minlength=k)
    batch_d = np.bincount(index, weights=d, minlength=k)
    rate = float(batch_c.sum() / batch_d.sum())
    mean_d = float(batch_d.mean())
    residuals = (batch_c - rate * batch_d) / mean_d  # = (batch rate - rate) x its duration share
    se = math.sqrt(float(np.sum(residuals ** 2)) / (k * (k - 1)))
    half = t_quantile(k - 1) * se
    return Interval(max(0.0, rate - half), rate + half)


def row_percentiles(matrix: np.ndarray, buckets: np.ndarray, pct: float) -> np.ndarray:
    """Each row's percentile by Locust's rule (`steady.histogram_percentile`), NaN for an empty row:
    the largest bucket with no more than int(total x pct / 100) requests below it."""
    return rows_percentiles(matrix, buckets, [pct])[0]


def rows_percentiles(matrix: np.ndarray, buckets: np.ndarray, pcts: Sequence[float]) -> list[np.ndarray]:
    """`row_percentiles` for several percentiles, the cumulative counts summed once."""
    totals = matrix.sum(axis=1)
    below = np.cumsum(matrix, axis=1) - matrix
    out = []
    for pct in pcts:
        wanted = np.floor(totals * pct / 100.0)
        last = (below <= wanted[:, None]).sum(axis=1) - 1
        values = buckets[np.clip(last, 0, len(buckets) - 1)].astype("float64")
        values[totals <= 0] = np.nan
        out.append(values)
    return out


def percentile_cis(hists: Sequence[Mapping[int, int]], pcts: Sequence[float], *, seed: int = 0,
                   intervals: Sequence[float] | None = None, resamples: int = RESAMPLES) -> dict[float, Interval]:
    """95 % intervals of several percentiles of the merged histograms, from one block bootstrap
    (module doc; `intervals`: each sample's duration, 1 s each when not given)."""
    wanted = [float(p) for p in pcts]
    n = len(hists)
    index, k = batch_index([1.0] * n if intervals is None else intervals, BLOCK_POWER)
    buckets = np.array(sorted({b for h in hists for b in h}), dtype="int64")
    if k < 2 or not len(buckets):
        return {p: UNKNOWN for p in wanted}
    column = {int(b): i for i, b in enumerate(buckets)}
    width = len(buckets)
    cells: list[int] = []  # block x width + bucket column, one per histogram entry (numpy sums them at once)
    counts: list[int] = []
    for block, hist in zip(index.tolist(), hists, strict=True):
        offset = block * width
        for bucket, count in hist.items():
            cells.append(offset + column[bucket])
            counts.append(count)
    blocks = np.bincount(np.asarray(cells, dtype="int64"), weights=np.asarray(counts, dtype="float64"),
                         minlength=k * width).round().astype("int64").reshape(k, width)
    draws = np.random.default_rng(seed).multinomial(k, np.full(k, 1.0 / k), size=resamples).astype("float64")
    merged = draws @ blocks.astype("float64")  # BLAS: an integer product takes ~10 x longer; counts stay exact
    whole = blocks.sum(axis=0, keepdims=True)
    tail = (1.0 - LEVEL) / 2.0
    out: dict[float, Interval] = {}
    points = rows_percentiles(whole, buckets, wanted)
    for pct, point_row, all_replicates in zip(wanted, points, rows_percentiles(merged, buckets, wanted), strict=True):
        point = point_row[0]
        replicates = all_replicates[~np.isnan(all_replicates)]
        if not len(replicates) or np.isnan(point):
            out[pct] = UNKNOWN
            continue
        low = float(np.quantile(replicates, tail, method="inverted_cdf"))
        high = float(np.quantile(replicates, 1.0 - tail, method="higher"))
        out[pct] = Interval(min(low, float(point)), max(high, float(point)))
    return out


def percentile_ci(hists: Sequence[Mapping[int, int]], pct: float, *, seed: int = 0,
                  intervals: Sequence[float] | None = None, resamples: int = RESAMPLES) -> Interval:
    """95 % interval of the `pct` percentile of the merged histograms, by a block bootstrap
    (`percentile_cis` for several percentiles at once)."""
    return percentile_cis(hists, [pct], seed=seed, intervals=intervals, resamples=resamples)[float(pct)]


def order_statistic_ci(values: Sequence[float], pct: float) -> Interval:
    """95 % interval of the `pct` percentile of independent exact samples (cold starts timed one by
    one), distribution-free: the order statistics x(l) <= x(u) whose ranks bound the binomial count of
    samples below the percentile with at least 95 % probability (the narrowest such pair). Too few
    samples for 95 % (under 6 for a median): unknown."""
    ordered = sorted(float(v) for v in values)
    n = len(ordered)
    q = float(pct) / 100.0
    if n < 2 or not 0.0 < q < 1.0:
        return UNKNOWN
    pmf = [math.comb(n, k) * q ** k * (1.0 - q) ** (n - k) for k in range(n + 1)]
    best: tuple[int, int] | None = None
    for low in range(1, n + 1):  # x(low) .. x(high), ranks from 1: covered when low <= B < high
        for high in range(low + 1, n + 1):
            if sum(pmf[low:high]) >= LEVEL and (best is None or high - low < best[1] - best[0]):
                best = (low, high)
                break
    if best is None:
        return UNKNOWN
    return Interval(ordered[best[0] - 1], ordered[best[1] - 1])
