"""summary.json -> the figures a sweep compares (pure): capacity from the plateau object (its
capacity_rps when present), latency at the knee, the best step without a search, the run's own
words when no load was acceptable, CPU over the knee's window."""

from __future__ import annotations

from sm_locust.sweep.realtime.measure import measure, usage_from_steps_csv, usage_in_window


def step(users, rps, p95, start, end, error_rate=0.0, **kw):
    return {"users": users, "rps": rps, "p50_ms": p95 / 2, "p90_ms": p95 - 5, "p95_ms": p95, "p99_ms": p95 + 10,
            "p99_9_ms": p95 + 20, "error_rate": error_rate, "start": start, "end": end, **kw}


STEPS = [step(1, 22.0, 48, "2026-01-01T00:00:00Z", "2026-01-01T00:00:10Z"),
         step(4, 88.0, 49, "2026-01-01T00:00:10Z", "2026-01-01T00:00:20Z"),
         step(8, 110.0, 95, "2026-01-01T00:00:20Z", "2026-01-01T00:00:30Z"),
         step(4, 89.0, 50, "2026-01-01T00:00:30Z", "2026-01-01T00:00:40Z")]


def test_plateau_capacity_and_the_knee():
    plateau = {"users": 4, "rps": 89.0, "capacity_rps": 108.0, "p50_ms": 25.0, "p95_ms": 51.0, "p99_ms": 60.0,
               "error_rate": 0.0, "reached": True, "text": "plateau: capacity 108 req/s; knee 89 req/s at 4 users"}
    m = measure({"steps": STEPS, "plateau": plateau, "totals": {"requests": 3000, "failures": 0}}, 95.0)
    # the knee step's own figures (this older summary.json's plateau said p95 51 for a step that measured 50)
    assert (m.capacity_rps, m.knee_rps, m.knee_users, m.latency_ms) == (108.0, 89.0, 4, 50)
    assert m.knee_start == 1767225630.0  # the re-run of 4 users, closest to the plateau's rps
    assert [p["users"] for p in m.curve] == [1, 4, 8] and m.curve[1]["rps"] == 89.0  # last measurement per load
    assert measure({"steps": STEPS, "plateau": plateau}, 99.9).latency_ms == 70  # p99.9 from the knee step


def test_each_figure_is_its_own_steps_by_index():
    steps = [dict(s, ci95={"rps": [s["rps"] - 2, s["rps"] + 2], "p95_ms": [s["p95_ms"] - 3, s["p95_ms"] + 4]})
             for s in STEPS]
    plateau = {"users": 4, "rps": 89.0, "capacity_rps": 108.0, "capacity_ci95": [104.0, 112.0], "knee_step": 3,
               "capacity_step": 2, "p95_ms": 50, "reached": True}
    m = measure({"steps": steps, "plateau": plateau, "verdict": {"status": "ok", "reason": None}}, 95.0)
    assert (m.knee_step, m.knee_rps, m.knee_users, m.latency_ms, m.latency_ci95) == (3, 89.0, 4, 50, [47, 54])
    assert (m.capacity_step, m.capacity_rps, m.capacity_ci95, m.capacity_users, m.capacity_latency_ms) == \
        (2, 108.0, [104.0, 112.0], 8, 95)
    assert m.knee_start == 1767225630.0 and m.inconclusive is False
    bound = measure({"steps": steps, "plateau": plateau,
                     "verdict": {"status": "inconclusive", "reason": "client CPU 95 %"}}, 95.0)
    assert bound.inconclusive and bound.inconclusive_reason == "client CPU 95 %"


def test_the_knee_is_the_searchs_knee_step_even_where_a_naive_reading_differs():
    # CI read: the plateau's knee step 4 (5 users, 88.2 req/s, p95 96) and capacity step 2 (8 users, 90.7,
    # p95 150); the sweep once moved an unstable knee to the capacity step and quoted a knee the run never had
    steps = [step(1, 22.0, 48, "2026-01-01T00:00:00Z", "2026-01-01T00:00:10Z", stable=True),
             step(4, 80.0, 50, "2026-01-01T00:00:10Z", "2026-01-01T00:00:20Z", stable=True),
             step(8, 90.7, 150, "2026-01-01T00:00:20Z", "2026-01-01T00:00:30Z", stable=True,
                  ci95={"rps": [88.0, 93.0]}),
             step(6, 90.0, 120, "2026-01-01T00:00:30Z", "2026-01-01T00:00:40Z", stable=True),
             step(5, 88.2, 96, "2026-01-01T00:00:40Z", "2026-01-01T00:00:50Z", stable=False,
                  ci95={"rps": [80.0, 96.0], "p95_ms": [90, 104]})]
    plateau = {"users": 5, "rps": 88.2, "capacity_rps": 90.7, "capacity_ci95": [88.0, 93.0], "knee_step": 4,
               "capacity_step": 2, "p95_ms": 96, "reached": True}
    m = measure({"steps": steps, "plateau": plateau}, 95.0)
    # not the capacity step, not the other step at 5-ish users closest in rate: the record's knee_step
    assert (m.knee_step, m.knee_users, m.knee_rps, m.latency_ms, m.latency_ci95, m.knee_rps_ci95) == \
        (4, 5, 88.2, 96, [90, 104], [80.0, 96.0])
    assert (m.capacity_step, m.capacity_users, m.capacity_rps) == (2, 8, 90.7)
    assert m.knee_note == "the knee step was unstable: no stable step reached the plateau"
    calm = [dict(s, stable=True) for s in steps]
    calm_m = measure({"steps": calm, "plateau": plateau}, 95.0)
    assert calm_m.knee_step == 4 and calm_m.knee_note is None


def test_an_older_summary_without_capacity_uses_the_knee():
    plateau = {"users": 4, "rps": 89.0, "p95_ms": 51.0}
    assert measure({"steps": STEPS, "plateau": plateau}).capacity_rps == 89.0


def test_no_acceptable_load():
    text = "no acceptable step: p95 50 ms > SLO 10 ms at 1 user"
    m = measure({"steps": STEPS[:1], "plateau": {"users": None, "rps": None, "text": text}})
    assert m.capacity_rps is None and m.no_capacity_reason == text


def test_constant_load_uses_the_best_step_within_the_error_budget():
    steps = [step(6, 120.0, 80, "2026-01-01T00:00:00Z", "2026-01-01T00:00:03Z", error_rate=0.2),
             step(2, 60.0, 30, "2026-01-01T00:00:03Z", "2026-01-01T00:00:06Z")]
    m = measure({"steps": steps, "plateau": None}, 95.0, max_error_rate=0.01)
    assert (m.capacity_rps, m.knee_users, m.basis) == (60.0, 2, "best step")
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


def test_a_knee_placed_only_within_a_granule_spans_the_steps_there():
    # the search left open whether the knee is 4 or 5 users (a gain straddling 5 % at the step budget) and
    # said so (knee_undecided, knee_loads [4, 5]): the knee's latency is any of those steps', so a sweep
    # compares the span of their intervals, never the knee step's point alone
    steps = [step(1, 22.0, 48, "2026-01-01T00:00:00Z", "2026-01-01T00:00:10Z", ci95={"rps": [21, 23]}),
             step(4, 88.0, 50, "2026-01-01T00:00:10Z", "2026-01-01T00:00:20Z",
                  ci95={"rps": [85.0, 91.0], "p95_ms": [47, 54]}),
             step(16, 96.0, 160, "2026-01-01T00:00:20Z", "2026-01-01T00:00:30Z",
                  ci95={"rps": [95.0, 97.0], "p95_ms": [150, 170]}),
             step(5, 93.0, 62, "2026-01-01T00:00:30Z", "2026-01-01T00:00:40Z",
                  ci95={"rps": [90.0, 96.0], "p95_ms": [58, 66]})]
    plateau = {"users": 4, "rps": 88.0, "capacity_rps": 96.0, "capacity_ci95": [95.0, 97.0], "knee_step": 1,
               "capacity_step": 2, "p95_ms": 50, "reached": True, "knee_loads": [4.0, 5.0]}
    placed = measure({"steps": steps, "plateau": plateau}, 95.0)
    assert (placed.knee_users, placed.latency_ms, placed.latency_ci95, placed.knee_rps_ci95) == \
        (4, 50, [47, 54], [85.0, 91.0]) and placed.knee_note is None
    open_knee = dict(plateau, knee_undecided=["5 users still undecided at its step budget: throughput gain +3.2 % "
                                              "[+1.1, +5.3] straddles 5 %"])
    m = measure({"steps": steps, "plateau": open_knee}, 95.0)
    assert (m.knee_users, m.latency_ms, m.knee_rps) == (4, 50, 88.0)  # the knee step's own figures
    assert (m.latency_ci95, m.knee_rps_ci95) == ([47, 66], [85.0, 96.0])  # 4 and 5 users, not 16
    assert m.knee_note == ("the knee lies between 4 and 5 users (a throughput gain left open at the step budget): "
                           "its intervals span those steps")
    bare = [dict(s, ci95=None) if s["users"] == 5 else s for s in steps]  # a step without intervals: unknown
    assert measure({"steps": bare, "plateau": open_knee}, 95.0).latency_ci95 is None
