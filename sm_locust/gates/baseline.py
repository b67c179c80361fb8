"""Regression gates: compare this run with an earlier run (the baseline) within a tolerance.

p95 and p99 may grow to baseline x (1 + tolerance), goodput (successful invocations per second)
may fall to baseline x (1 - tolerance), and the error rate may grow to baseline x (1 + tolerance) + ERROR_RATE_SLACK
(absolute), so a clean baseline still tolerates a stray failure. Metrics the baseline lacks (no
requests, no percentile) are skipped: there is nothing to regress from.
"""

from __future__ import annotations

from sm_locust.errors import UsageError
from sm_locust.gates.gates import NoRegression
from sm_locust.record.runfolder import RunData

DEFAULT_TOLERANCE = 0.10
ERROR_RATE_SLACK = 0.01  # one percentage point


def regression_gates(baseline: RunData, tolerance: float = DEFAULT_TOLERANCE,
                     slack: float = ERROR_RATE_SLACK) -> list[NoRegression]:
    if not 0.0 <= tolerance < 1.0:
        raise UsageError(f"--tolerance {tolerance:g}: give a fraction from 0 up to (not including) 1, e.g. 0.1 for 10%")
    totals = baseline.totals
    if totals.requests <= 0:
        raise UsageError(f"baseline {baseline.source or 'run'} has no requests: nothing to compare against")
    gates = []
    for metric, value in (("p95", totals.p95_ms), ("p99", totals.p99_ms), ("goodput", totals.goodput_rps)):
        if value:
            gates.append(NoRegression(metric, float(value), tolerance))
    gates.append(NoRegression("error_rate", totals.error_rate, tolerance, slack=slack))
    return gates
