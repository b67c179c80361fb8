"""Regression gates: compare this run with an earlier run (the baseline), telling a regression from noise.

p95, p99 and goodput: the change new / baseline with its 95 % interval, from a block bootstrap of
both runs' per-second histograms and counts (timeline.jsonl; `compare.py` says why this method).
The gate FAILS only on a significant regression larger than the tolerance: the whole interval of
the change past it (p95 or p99 above baseline x (1 + tolerance), goodput under baseline x
(1 - tolerance)), the rule of criterion's change detection with the tolerance as its noise
threshold. Otherwise it passes, and says whether the change is within the tolerance (the whole
interval inside it) or only not significantly beyond it (the interval reaches past it: a longer run
would decide; the line says about how long, `decide.longer_run_factor_split`). A regression gate
asks "did it get worse?", so the burden of proof is on failing; a threshold gate asks "is it within
the limit?", so there an undecided figure is INCONCLUSIVE (gates.py).

The error rate is a count: it may grow to baseline x (1 + tolerance) + ERROR_RATE_SLACK (absolute),
so a clean baseline still tolerates a stray failure. A run or baseline without per-second samples
(a folder from before timeline.jsonl, an in-process result without a folder) or with fewer than
`compare.MIN_SECONDS` of them is compared on its point values, said so. Metrics the baseline lacks
(no requests, no percentile) are skipped: nothing to regress from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

from sm_locust.errors import UsageError
from sm_locust.gates.compare import (
    MIN_SECONDS,
    Change,
    Replicates,
    compare,
    percentile_replicates,
    rate_replicates,
)
from sm_locust.gates.decide import FAIL, PASS, longer_run_factor_split, longer_run_text
from sm_locust.gates.gates import Gate, NoRegression, Outcome
from sm_locust.measure.timeline import Second
from sm_locust.record.runfolder import RunData
from sm_locust.record.timeline import read_seconds, timeline_path
from sm_locust.util.formatting import MISSING, change, compact

DEFAULT_TOLERANCE = 0.10
ERROR_RATE_SLACK = 0.01  # one percentage point
# figure -> (summary.json totals key, percentile or None for goodput, unit, higher is better)
FIGURES: dict[str, tuple[str, float | None, str, bool]] = {
    "p95": ("p95_ms", 95.0, "ms", False),
    "p99": ("p99_ms", 99.0, "ms", False),
    "goodput": ("goodput_rps", None, "req/s", True),
}
BASE_SEED, NEW_SEED = 1, 2  # each run resampled by its own seeded generator: the same folders, the same line


def run_seconds(run: RunData) -> list[Second] | None:
    """The run's per-second samples (timeline.jsonl), None when its folder has none (or it has no folder)."""
    if run.run_dir is None:
        return None
    path = timeline_path(run.run_dir)
    if path is None:
        return None
    try:
        seconds = read_seconds(path)
    except (OSError, ValueError):
        return None
    return seconds or None


def replicates(seconds: list[Second], figure: str, seed: int) -> Replicates:
    """Bootstrap replicates of one figure over a run's seconds."""
    _, pct, _, _ = FIGURES[figure]
    if pct is not None:
        return percentile_replicates([s.hist for s in seconds], pct, seed=seed)
    return rate_replicates([s.successes for s in seconds], [s.interval for s in seconds], seed=seed)


@dataclass(eq=False)
class Regression(Gate):
    """p95, p99 or goodput against the baseline's, judged on the change's 95 % interval (module docstring)."""

    figure: str
    baseline: RunData
    tolerance: float
    scope: str | None = None
    _last: tuple[RunData, Change] | None = field(default=None, repr=False)  # judge() and observed() share it

    @property
    def key(self) -> str:
        return FIGURES[self.figure][0]

    def baseline_run(self) -> RunData:
        return self.baseline

    @property
    def unit(self) -> str:
        return FIGURES[self.figure][2]

    @property
    def higher_is_better(self) -> bool:
        return FIGURES[self.figure][3]

    @property
    def base_value(self) -> float | None:
        value = getattr(self.baseline.totals, self.key)
        return float(value) if value else None

    @property
    def name(self) -> str:
        return (f"{self.figure} vs baseline {compact(_rounded(self.base_value), ' ' + self.unit)} "
                f"(fails on a significant regression beyond {self.tolerance * 100:g}%)")

    @cached_property
    def _base_seconds(self) -> list[Second] | None:
        return run_seconds(self.baseline)

    @cached_property
    def _base_replicates(self) -> Replicates | None:
        seconds = self._base_seconds
        return replicates(seconds, self.figure, BASE_SEED) if seconds else None

    def change(self, run: RunData) -> Change:
        """new / baseline with its interval (the interval None when either run has no per-second samples)."""
        if self._last is not None and self._last[0] is run:
            return self._last[1]
        value = getattr(run.totals, self.key)
        new_value = float(value) if value is not None else None
        seconds = run_seconds(run)
        base = self._base_replicates
        if seconds and base is not None:
            result = compare(self.figure, base, replicates(seconds, self.figure, NEW_SEED),
                             base_value=self.base_value, new_value=new_value)
        else:
            ratio = new_value / self.base_value if new_value is not None and self.base_value else None
            result = Change(self.figure, self.base_value, new_value, ratio)
        self._last = (run, result)
        return result

    def _shown(self, c: Change) -> str:
        bounds = c.change_bounds()
        low, high = bounds if bounds else (None, None)
        return (f"{self.figure} {change(c.change, low, high)} "
                f"({compact(_rounded(c.new), ' ' + self.unit)} vs {compact(_rounded(c.base), ' ' + self.unit)})")

    def observed(self, run: RunData) -> str:
        c = self.change(run)
        return self._shown(c) if c.ratio is not None else MISSING

    def judge(self, run: RunData) -> Outcome:
        c = self.change(run)
        if c.ratio is None:
            return Outcome(FAIL, f"no {self.figure} to compare: the run has no requests")
        tol = self.tolerance
        worse_point = (1.0 - c.ratio) if self.higher_is_better else (c.ratio - 1.0)  # > 0: worse than the baseline
        bounds = c.change_bounds()
        if bounds is None:
            if self._base_seconds is None or not run_seconds(run):
                why = "no per-second samples (timeline.jsonl) in " + (
                    "the baseline" if self._base_seconds is None else "this run")
            else:
                why = f"fewer than {MIN_SECONDS} seconds of samples in a run: too short for an interval"
            if worse_point > tol + 1e-12:
                return Outcome(FAIL, f"{self._shown(c)}: beyond the {tol * 100:g}% tolerance "
                               f"(point values: {why})")
            return Outcome(PASS, f"{self._shown(c)}: within the {tol * 100:g}% tolerance (point values: {why})")
        low, high = bounds
        least_worse, most_worse = (-high, -low) if self.higher_is_better else (low, high)
        if least_worse > tol:
            return Outcome(FAIL, f"{self._shown(c)}: a significant regression beyond the {tol * 100:g}% tolerance "
                           "(the whole interval is past it)")
        if most_worse <= tol:
            return Outcome(PASS, f"{self._shown(c)}: within the {tol * 100:g}% tolerance")
        # undecided: the interval reaches past the tolerance (on the log scale the variances add)
        limit = math.log(1.0 - tol) if self.higher_is_better else math.log(1.0 + tol)
        centre = math.log(c.ratio)
        reach = abs((math.log(c.low) if self.higher_is_better else math.log(c.high)) - centre)  # type: ignore[arg-type]
        factor = longer_run_factor_split(abs(limit - centre), reach, c.var_base, c.var_new)
        duration = run.record.duration_s
        more = longer_run_text(factor, float(duration) if duration else None, baseline=True)
        return Outcome(PASS, f"{self._shown(c)}: not a significant regression beyond the {tol * 100:g}% tolerance, "
                       f"but the interval reaches past it; {more}")


def _rounded(value: float | None) -> float | None:
    """A figure for the line: whole numbers from 10 up (latencies in ms, req/s), else 3 significant digits."""
    if value is None:
        return None
    return float(round(value)) if abs(value) >= 10 else float(f"{value:.3g}")


def regression_gates(baseline: RunData, tolerance: float = DEFAULT_TOLERANCE,
                     slack: float = ERROR_RATE_SLACK) -> list[Gate]:
    if not 0.0 <= tolerance < 1.0:
        raise UsageError(f"--tolerance {tolerance:g}: give a fraction from 0 up to (not including) 1, e.g. 0.1 for 10%")
    totals = baseline.totals
    if totals.requests <= 0:
        raise UsageError(f"baseline {baseline.source or 'run'} has no requests: nothing to compare against")
    gates: list[Gate] = []
    for figure, (key, _, _, _) in FIGURES.items():
        if getattr(totals, key):
            gates.append(Regression(figure, baseline, tolerance))
    gates.append(NoRegression("error_rate", totals.error_rate, tolerance, slack=slack, source=baseline))
    return gates
