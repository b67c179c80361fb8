"""summary.json's figures contract (issue 28): intervals beside each figure, the judged steps as the
record, the plateau's steps named by index, and the run's verdict (ok | inconclusive)."""

from __future__ import annotations

import numpy as np

from sm_locust.measure.steady import intervals_dict, measure_step, window_intervals
from sm_locust.measure.timeline import Second
from sm_locust.plateau.search import PlateauSearch
from sm_locust.plateau.synthetic import SyntheticEndpoint
from sm_locust.record.accumulate import RunTimeline
from sm_locust.record.schema import summary_problem
from sm_locust.record.summary import build_summary, run_verdict, step_line, step_record, step_records
from sm_locust.util.formatting import with_interval

CI_KEYS = {"rps", "goodput_rps", "p50_ms", "p95_ms", "p99_ms"}


def noisy(n, users=4, rate=100, t0=1000.0, seed=0, failures=0, cpu=None, wait=None):
    counts = np.random.default_rng(seed).poisson(rate, n)
    return [Second(t=t0 + i + 1, users=users, spawning=False, requests=int(c), failures=failures,
                   hist={20: int(c) - 5, 40: 5}, client_cpu_pct=cpu, client_wait_pct=wait)
            for i, c in enumerate(counts)]


def summary_of(seconds, **kwargs):
    return build_summary(endpoint="ep", started_at=seconds[0].t - 1, ended_at=seconds[-1].t,
                         totals={"requests": sum(s.requests for s in seconds),
                                 "failures": sum(s.failures for s in seconds), **kwargs.pop("totals", {})},
                         errors={}, seconds=seconds, **kwargs)


def test_each_step_record_carries_the_intervals_of_its_steady_window():
    timeline = noisy(20, users=2) + noisy(20, users=4, t0=1020.0, seed=1)
    records = step_records(timeline)
    assert [r["users"] for r in records] == [2, 4]
    for record in records:
        assert set(record["ci95"]) == CI_KEYS
        for key in CI_KEYS:
            low, high = record["ci95"][key]
            assert low <= record[key] <= high
    assert summary_problem(summary_of(timeline)) is None


def test_a_step_too_short_for_an_interval_says_null_not_a_guess():
    record = step_record(measure_step(noisy(3)))  # 3 steady seconds: batch means needs 4
    assert record["ci95"] == {key: None for key in CI_KEYS}
    assert "(±" not in step_line(1, record) and "[" not in step_line(1, record)


def test_the_live_line_is_printed_from_the_record_it_writes():
    record = step_record(measure_step(noisy(30, users=12, seed=3)))
    line = step_line(5, record)
    assert line.startswith(f"step 5: 12 users: {with_interval(record['rps'], record['ci95']['rps'], ' req/s', 1)}")
    assert f"p95 {with_interval(record['p95_ms'], record['ci95']['p95_ms'], ' ms')}" in line


def test_judged_steps_are_the_record_and_the_cut_by_users_is_not_used():
    timeline = RunTimeline()
    first = noisy(15, users=2)
    timeline.extend(first)
    judged = measure_step(first[:12])  # the search judged its step before the load changed
    timeline.judge(judged)
    timeline.extend(noisy(15, users=4, t0=1015.0, seed=1))
    steps = timeline.steps()
    assert steps[0] == step_record(judged)  # the judged window, not the cut by user count
    assert steps[0]["requests"] == judged.requests != step_records(first)[0]["requests"]
    assert [s.get("judged", True) for s in steps] == [True, False]  # the step under way: not judged yet


def test_totals_carry_the_whole_run_intervals_from_bounded_blocks():
    timeline = RunTimeline(max_blocks=16)
    seconds = noisy(300, rate=50, seed=5)
    timeline.extend(seconds)
    blocks = timeline.run_seconds()
    assert len(blocks) <= 16 and sum(s.requests for s in blocks) == sum(s.requests for s in seconds)
    ci = intervals_dict(window_intervals(blocks))
    summary = summary_of(seconds, totals={"ci95": ci})
    low, high = summary["totals"]["ci95"]["rps"]
    rate = sum(s.requests for s in seconds) / 300
    assert low <= rate <= high and summary_problem(summary) is None


def test_the_plateau_names_its_steps_and_quotes_their_own_figures():
    endpoint = SyntheticEndpoint(concurrency=6, service_ms=40.0, overhead_ms=2.0)
    search = PlateauSearch(1, 1000)
    decision = search.first()
    steps = []
    while not decision.stop:
        step = measure_step(endpoint.users_step(int(decision.load), 10), min_subwindow_s=1)
        steps.append(step)
        decision = search.feed(step)
    verdict = search.verdict()
    plateau = verdict.as_dict(steps)
    capacity, knee = steps[plateau["capacity_step"]], steps[plateau["knee_step"]]
    assert capacity is verdict.capacity and knee is verdict.plateau
    assert plateau["capacity_rps"] == round(capacity.goodput_rps, 3)
    assert plateau["capacity_ci95"] == capacity.ci95["goodput_rps"].as_list()
    assert plateau["users"] == knee.users and plateau["p95_ms"] == knee.p95_ms
    text = plateau["text"]
    assert f"step {plateau['capacity_step'] + 1}: {capacity.load_label()}" in text
    assert f"knee step {plateau['knee_step'] + 1}: {knee.goodput_rps:.0f} req/s at {knee.load_label()}" in text
    assert plateau["inconclusive"] is False and plateau["inconclusive_reason"] is None


def test_a_client_bound_step_makes_a_constant_load_run_inconclusive():
    ok = summary_of(noisy(20, cpu=40.0))
    assert ok["verdict"] == {"status": "ok", "reason": None}
    starved = summary_of(noisy(20, cpu=30.0, wait=60.0))
    assert starved["verdict"]["status"] == "inconclusive"
    assert ("step 1 (4 users) was client-bound: the client ran or waited for a CPU 90 % of the time (CPU 30 %, "
            "waiting 60 %") in starved["verdict"]["reason"]
    # a generator that waits for the CPU now and then (a busy machine) but keeps up is not client-bound
    assert summary_of(noisy(20, cpu=5.0, wait=30.0))["verdict"]["status"] == "ok"
    assert starved["steps"][0]["client_bound"] is True and summary_problem(starved) is None


def test_the_plateau_verdict_decides_the_runs():
    inconclusive = {"inconclusive": True, "inconclusive_reason": "the load generator was the bottleneck: x"}
    assert run_verdict(inconclusive, []) == {"status": "inconclusive", "reason": inconclusive["inconclusive_reason"]}
    # a summary.json written before `inconclusive` existed: its client_bound says the same
    assert run_verdict({"client_bound": True, "client_reason": "client CPU 95 %"}, [])["status"] == "inconclusive"
    # a client-bound step the search did not keep (it never decides the answer) leaves the plateau ok
    assert run_verdict({"inconclusive": False}, [{"client_bound": True}]) == {"status": "ok", "reason": None}


def test_the_schema_refuses_an_interval_that_is_not_one():
    summary = summary_of(noisy(20))
    summary["steps"][0]["ci95"]["rps"] = [120.0, 80.0]
    assert summary_problem(summary) == ("steps[0].ci95.rps is [120.0, 80.0] (a JSON list), "
                                        "not an interval [low, high] (or null)")
    summary = summary_of(noisy(20))
    summary["plateau"] = {"capacity_ci95": "wide"}
    assert "plateau.capacity_ci95" in summary_problem(summary)


def test_a_step_the_search_has_not_judged_is_listed_after_the_judged_ones_and_marked():
    timeline = RunTimeline()
    first = noisy(15, users=2)
    timeline.extend(first)
    timeline.judge(measure_step(first[:12]))
    later = noisy(15, users=4, t0=1015.0, seed=1)
    timeline.extend(later)  # under way (a checkpoint), or cut short by the end of the run
    steps = timeline.steps()
    assert [(s["users"], s.get("judged", True)) for s in steps] == [(2, True), (4, False)]
    assert steps[1] == {**step_records(later)[0], "judged": False}
    assert summary_problem(summary_of(first + later, steps=steps)) is None
