"""The report's step table shows each step's loop lag and flags a step whose figures are the load generator's."""

from __future__ import annotations

import pandas as pd

from sm_locust.report import merge
from sm_locust.report.render import steps_table

BASE = 1704110400


def record(users, start, client_bound, lag):
    return {"users": users, "start": f"2024-01-01T12:00:{start:02d}Z", "end": f"2024-01-01T12:00:{start + 10:02d}Z",
            "requests": 100, "failures": 0, "rps": 10.0, "p50_ms": 80.0, "p95_ms": 90.0, "p99_ms": 95.0,
            "client_bound": client_bound, "loop_lag": lag}


def test_step_table_shows_loop_lag_and_the_flag():
    seconds = pd.DataFrame({"epoch_s": [BASE + i for i in range(25)], "requests": [10.0] * 25})
    lag = {"samples": 2000, "p50_ms": 0.2, "p99_ms": 31.0, "max_ms": 80.0, "lagging": 0.2, "throttled_periods": None,
           "throttled_s": None}
    summary = {"steps": [record(4, 0, False, None), record(8, 10, True, lag)]}  # step 1: an older record
    steps = merge.step_records(seconds, merge.step_spans(summary, seconds))
    assert pd.isna(steps.iloc[0].get("loop_lag_p99_ms")) and steps.iloc[1]["loop_lag_p99_ms"] == 31.0
    assert list(steps["client_flag"].fillna("")) == ["", "client-bound"]
    table = steps_table(steps)
    assert "<th>loop lag p99 ms</th><th>load generator</th>" in table
    assert "<td>31.0</td><td>client-bound</td></tr>" in table and table.count("client-bound") == 1
