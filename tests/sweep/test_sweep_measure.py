"""summary.json -> the figures a sweep compares (pure): every figure from one step (the capacity
step: its goodput, users and percentile, never one step's rate with another's users), the knee
beside it, the best step without a search, the run's own words when no load was acceptable, CPU
over the step's window."""

from __future__ import annotations

from sm_locust.sweep.realtime.measure import measure, usage_from_steps_csv, usage_in_window


def step(users, rps, p95, start, end, error_rate=0.0, **kw):
    return {"users": users, "rps": rps, "p50_ms": p95 / 2, "p90_ms": p95 - 5, "p95_ms": p95, "p99_ms": p95 + 10,
            "p99_9_ms": p95 + 20, "error_rate": error_rate, "start": start, "end": end, **kw}


STEPS = [step(1, 22.0, 48, "2026-01-01T00:00:00Z", "2026-01-01T00:00:10Z"),
         step(4, 88.0, 49, "2026-01-01T00:00:10Z", "2026-01-01T00:00:20Z"),
         step(8, 110.0, 95, "2026-01-01T00:00:20Z", "2026-01-01T00:00:30Z"),
         step(4, 89.0, 50, "2026-01-01T00:00:30Z", "2026-01-01T00:00:40Z")]


def test_every_figure_comes_from_the_capacity_step():
    """The batching sweep's line joined 245.6 req/s (one step) with 26 users and p95 140 ms (another):
    now the rate, the users, the percentile and the window are the capacity step's own."""
    plateau = {"users": 4, "rps": 89.0, "capacity_rps": 110.0, "capacity_step": 2, "capacity_ci95": [104.0, 116.0],
               "p50_ms": 25.0, "p95_ms": 51.0, "p99_ms": 60.0, "error_rate": 0.0, "reached": True,
               "text": "plateau: capacity 110 req/s at step 3: 8 users; knee 89 req/s at 4 users"}
    steps = [dict(s) for s in STEPS]
    steps[2]["ci95"] = {"p95_ms": [90.0, 101.0]}
    m = measure({"steps": steps, "plateau": plateau, "totals": {"requests": 3000, "failures": 0}}, 95.0)
    assert (m.capacity_rps, m.capacity_users, m.capacity_step, m.latency_ms) == (110.0, 8, 3, 95)
    assert (m.capacity_ci95, m.latency_ci95) == ([104.0, 116.0], [90.0, 101.0])
    assert (m.p50_ms, m.p99_ms) == (47.5, 105)  # the same step's
    assert (m.knee_rps, m.knee_users) == (89.0, 4)  # the knee, kept as its own
    assert m.step_start == 1767225620.0  # the capacity step's window (CPU and memory are read over it)
    assert [p["users"] for p in m.curve] == [1, 4, 8] and m.curve[1]["rps"] == 89.0  # last measurement per load
    assert measure({"steps": steps, "plateau": plateau}, 99.9).latency_ms == 115  # p99.9 of the same step


def test_an_older_summary_names_the_step_by_its_goodput_else_quotes_the_knee_step_whole():
    found = measure({"steps": STEPS, "plateau": {"users": 4, "rps": 89.0, "capacity_rps": 110.0}})
    assert (found.capacity_rps, found.capacity_users, found.latency_ms) == (110.0, 8, 95)
    knee = measure({"steps": STEPS, "plateau": {"users": 4, "rps": 89.0, "capacity_rps": 108.0, "p95_ms": 51.0}})
    assert (knee.capacity_rps, knee.capacity_users, knee.latency_ms) == (89.0, 4, 50)  # one step: the re-run


def test_no_acceptable_load():
    text = "no acceptable step: p95 50 ms > SLO 10 ms at 1 user"
    m = measure({"steps": STEPS[:1], "plateau": {"users": None, "rps": None, "text": text}})
    assert m.capacity_rps is None and m.no_capacity_reason == text


def test_constant_load_uses_the_best_step_within_the_error_budget():
    steps = [step(6, 120.0, 80, "2026-01-01T00:00:00Z", "2026-01-01T00:00:03Z", error_rate=0.2),
             step(2, 60.0, 30, "2026-01-01T00:00:03Z", "2026-01-01T00:00:06Z")]
    m = measure({"steps": steps, "plateau": None}, 95.0, max_error_rate=0.01)
    assert (m.capacity_rps, m.capacity_users, m.basis) == (60.0, 2, "best step")
    assert m.text.startswith("measured at 2 users (no plateau search)")
    bad = measure({"steps": steps[:1], "plateau": None}, 95.0, max_error_rate=0.01)
    assert bad.capacity_rps is None and "error rate 20.0 % > 1 %" in bad.no_capacity_reason


def test_endpoint_usage_over_the_knee_window():
    samples = [{"t": 9.0, "cpu_pct": 10, "memory_pct": 1.0}, {"t": 10.5, "cpu_pct": 80, "memory_pct": 2.0},
               {"t": 11.5, "cpu_pct": 100, "memory_pct": 2.0}, {"t": 13.0, "cpu_pct": 5, "memory_pct": 1.0}]
    assert usage_in_window(samples, 10.0, 12.0) == (90.0, 2.0)
    assert usage_in_window(samples, None, 12.0) == (None, None)
    rows = [{"users": "2", "cw_CPUUtilization_avg_pct": "40.0", "cw_MemoryUtilization_avg_pct": "3.5"},
            {"users": "4", "cw_CPUUtilization_avg_pct": "", "cw_MemoryUtilization_avg_pct": ""}]
    assert usage_from_steps_csv(rows, 2) == (40.0, 3.5)
    assert usage_from_steps_csv(rows, 4) == (None, None)
