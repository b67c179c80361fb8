"""The load generator's own delay: loop-lag counts, their figures, and the client-affected rule."""

from sm_locust.measure.looplag import (
    FIX_WORKERS,
    LAG_P99_OF_P50,
    LAGGING_LIMIT,
    MIN_LAG_SAMPLES,
    THROTTLED_PERIODS_LIMIT,
    LagCounts,
    LoopLag,
    client_affected_reason,
    lag_bucket_us,
    merge_counts,
    starved_reason,
)
from sm_locust.measure.steady import measure_step
from sm_locust.measure.timeline import Second
from sm_locust.record.summary import run_verdict, step_line, step_record


def counts(lags_us, interval_us=5000.0):
    c = LagCounts()
    for lag in lags_us:
        c.add_sample(interval_us + lag, lag)
    return c


def lag(p99_ms, samples=1000, throttled=None, lagging=LAGGING_LIMIT):
    return LoopLag(samples=samples, p50_ms=0.1, p99_ms=p99_ms, max_ms=p99_ms, lagging=lagging,
                   throttled_periods=throttled)


def test_buckets_keep_two_significant_digits():
    assert [lag_bucket_us(v) for v in (0.4, 42, 99.6, 123, 1_234, 56_789)] == [0, 42, 100, 120, 1_200, 57_000]


def test_figures_of_counts():
    c = counts([100.0] * 98 + [20_000.0, 40_000.0])
    figures = LoopLag.of(c)
    assert figures.samples == 100
    assert figures.p50_ms == 0.1 and figures.p99_ms == 20.0 and figures.max_ms == 40.0
    assert figures.lagging == round(c.lag_us / c.span_us, 4)
    assert figures.throttled_periods is None and figures.throttled_s is None  # no cgroup read


def test_counts_merge_and_take_are_deltas():
    a, b = counts([100.0] * 10), counts([3_000.0] * 10)
    b.add_throttling(periods=50, throttled=5, throttled_us=80_000.0)
    merged = merge_counts([a, None, b])
    assert merged is not None and merged.samples == 20 and merged.max_us == 3_000.0
    assert (merged.periods, merged.throttled, merged.throttled_us) == (50, 5, 80_000.0)
    assert a.samples == 10  # the parts are not changed
    assert merge_counts([None, None]) is None
    taken = b.take()
    assert taken.samples == 10 and taken.periods == 50
    assert not b and b.samples == 0 and b.periods is None  # emptied: the next take is the next delta
    assert LoopLag.of(merged).throttled_periods == 0.1 and LoopLag.of(merged).throttled_s == 0.08


def test_json_round_trips_and_old_records_load():
    c = counts([100.0, 2_500.0])
    c.add_throttling(10, 1, 5.0)
    assert LagCounts.from_json(c.to_json()) == LagCounts.from_json(c.to_json())
    assert LagCounts.from_json(c.to_json()).to_json() == c.to_json()
    figures = LoopLag.of(c)
    assert LoopLag.from_json(figures.to_json()) == figures
    assert LoopLag.from_json(None) is None  # a summary.json from before loop lag
    assert LoopLag.from_json({"samples": 5, "p99_ms": "x"}) == LoopLag(5, None, None, None, None)


def test_rule_lag_against_the_steps_median():
    p50 = 80.0
    at = LAG_P99_OF_P50 * p50
    assert client_affected_reason(lag(at), p50) is not None
    assert client_affected_reason(lag(at * 0.99), p50) is None
    assert client_affected_reason(lag(at, lagging=LAGGING_LIMIT * 0.99), p50) is None  # long stalls, but rare
    assert client_affected_reason(lag(at * 4, lagging=0.05), p50) is None  # e.g. one start-up stall in a short step
    assert "add workers" in client_affected_reason(lag(at), p50)
    assert client_affected_reason(lag(at, samples=MIN_LAG_SAMPLES - 1), p50) is None  # too few to judge
    assert client_affected_reason(None, p50) is None
    assert client_affected_reason(lag(at), None) is None  # no latency measured: nothing to compare


def test_rule_throttling_names_the_pod_limit():
    why = client_affected_reason(lag(0.1, throttled=THROTTLED_PERIODS_LIMIT), 80.0)
    assert why is not None and "raise the pod's CPU limit" in why
    assert client_affected_reason(lag(0.1, throttled=THROTTLED_PERIODS_LIMIT / 2), 80.0) is None
    # a lag beside some throttling: the fix is the limit, not workers
    assert "raise the pod's CPU limit" in client_affected_reason(lag(40.0, throttled=0.01), 80.0)


def starved_seconds(lag_ms, n=10, p50_ms=50):
    """`n` seconds of 100 requests at `p50_ms`, the client's low CPU and wait (what the old rule read),
    and a loop behind 40 % of the time whose every 20th wake-up was `lag_ms` late."""
    out = []
    for i in range(n):
        lagc = counts([100.0] * 190 + [lag_ms * 1000.0] * 10)
        lagc.lag_us = 0.4 * lagc.span_us
        out.append(Second(t=1000.0 + i, users=96, spawning=False, requests=100, failures=0, hist={p50_ms: 100},
                          client_cpu_pct=8.0, client_wait_pct=5.0, loop_lag=lagc))
    return out


def test_a_starved_client_is_client_bound_where_cpu_and_wait_read_low():
    step = measure_step(starved_seconds(lag_ms=30.0))
    assert step.client_cpu_pct + step.client_wait_pct < 90  # the old rule alone would pass it
    assert step.loop_lag is not None and step.loop_lag.p99_ms == 30.0
    assert step.loop_lag.samples == 8 * 200  # the steady window's seconds (20 % warm-up dropped)
    assert step.client_bound and "event loop lagged" in step.client_bound_reason
    record = step_record(step)
    assert record["client_bound"] is True and record["loop_lag"]["p99_ms"] == 30.0
    line = step_line(1, record)
    assert "loop lag p99 30 ms" in line and "CLIENT-BOUND" in line
    verdict = run_verdict(None, [record])
    assert verdict["status"] == "inconclusive" and "event loop lagged" in verdict["reason"]


def test_a_quiet_client_is_not():
    step = measure_step(starved_seconds(lag_ms=2.0))
    assert not step.client_bound
    assert "loop lag p99 2 ms" in step_line(1, step_record(step))


def test_a_step_without_loop_lag_reads_as_before():
    seconds = [Second(t=1000.0 + i, users=4, spawning=False, requests=100, failures=0, hist={10: 100})
               for i in range(10)]
    step = measure_step(seconds)
    assert step.loop_lag is None and not step.client_bound
    assert "loop_lag" not in step_record(step) and "loop lag" not in step_line(1, step_record(step))
    assert "loop_lag" not in seconds[0].as_dict()  # timeline lines without it stay as they were
    assert Second.from_dict(seconds[0].as_dict()).loop_lag is None


def test_timeline_line_keeps_the_counts():
    second = starved_seconds(30.0, n=1)[0]
    again = Second.from_dict(second.as_dict())
    assert again.loop_lag == second.loop_lag


def test_throttling_is_named_before_the_wait_it_also_reads_as():
    seconds = starved_seconds(lag_ms=2.0)
    for second in seconds:
        second.client_wait_pct = 85.0  # a throttled process waits on the run queue: the old rule fires too
        second.loop_lag.add_throttling(periods=10, throttled=9, throttled_us=500_000.0)
    step = measure_step(seconds)
    assert step.loop_lag.throttled_periods == 0.9
    assert step.client_bound and "raise the pod's CPU limit" in step.client_bound_reason


def test_a_window_without_requests_is_not_judged_on_its_lag():
    seconds = starved_seconds(lag_ms=300.0)
    for second in seconds:
        second.requests = 0  # a master's first seconds: a worker's start-up stall arrived, no request completed
    step = measure_step(seconds)
    assert step.loop_lag.p99_ms == 300.0 and not step.client_bound


def test_a_sweep_distrusts_the_run_through_the_same_rule():
    from sm_locust.record.summary import build_summary
    from sm_locust.sweep.trust import client_bound_reason

    starved = step_record(measure_step(starved_seconds(lag_ms=30.0)))
    quiet = step_record(measure_step(starved_seconds(lag_ms=2.0)))
    for steps, distrusted in (([quiet], False), ([quiet, starved], True)):
        summary = build_summary(endpoint="e", started_at=0.0, ended_at=20.0, totals={}, errors={}, seconds=(),
                                steps=steps)
        reason = client_bound_reason(summary)
        assert (reason is not None) is distrusted
        if distrusted:
            assert "event loop lagged" in reason and "step 2" in reason


def test_slo_margin_pure():
    from sm_locust.measure.looplag import slo_margin_reason

    within = [("p95", 108.0, 100.0)]
    assert "may be the client's" in slo_margin_reason(lag(10.0), within)
    assert slo_margin_reason(lag(7.0), within) is None  # broken by more than the lag: the endpoint's
    assert slo_margin_reason(lag(50.0), [("p95", 90.0, 100.0)]) is None  # met: the endpoint's own was lower still
    assert slo_margin_reason(lag(50.0, samples=MIN_LAG_SAMPLES - 1), within) is None
    assert slo_margin_reason(lag(10.0, lagging=LAGGING_LIMIT / 2), within) is None
    assert slo_margin_reason(None, within) is None


def test_a_search_sees_a_breach_within_the_lag_as_client_bound():
    from sm_locust.plateau.conditions import LatencySLO
    from sm_locust.plateau.search import PlateauSearch

    def step(p95_ms, lag_ms):
        seconds = starved_seconds(lag_ms=lag_ms, p50_ms=50)
        for second in seconds:
            second.hist = {50: 90, p95_ms: 10}
        return measure_step(seconds)

    assert not step(108, 10.0).client_bound  # the same step without an SLO to judge it by: fine
    for p95_ms, lag_ms, bound in ((108, 10.0, True), (108, 5.0, False), (150, 10.0, False)):
        search = PlateauSearch(4, 64, conditions=[LatencySLO(95, 100)])
        search.first()
        decision = search.feed(step(p95_ms, lag_ms))
        assert search.steps[0].client_bound is bound
        if bound:
            assert decision.load == 4 and decision.extend  # measured once more: the stall may pass
            decision = search.feed(step(p95_ms, lag_ms))
            assert decision.stop and search.verdict().client_bound
            assert "over its SLO 100 ms by less than" in search.verdict().text()
            assert "over its SLO" in step_record(search.steps[0])["client_bound_reason"]  # the record says the same


def test_starved_rule_pure():
    from sm_locust.measure.looplag import STARVED_MIN_CPU_PCT, STARVED_WAIT_OF_RUN, STARVED_WAIT_PCT, starved_reason

    # the development machine's steps (docs/facts.md): beside 6 CPU hogs 16 users ran 7.5 % and waited 16.4 %
    why = starved_reason(7.5, 16.4)
    assert why is not None and "waited for a CPU 16 %" in why and "2.2 times" in why and "add workers" in why
    # the same client alone on its CPU, on the same busy machine: 37 users ran 19 % and waited 15.8 %,
    # 128 users ran 17.3 % and waited 21.8 % (its busiest); 4 users beside the hogs waited 7.5 % of 3.8 %
    for cpu, wait in ((19.0, 15.8), (17.3, 21.8), (3.8, 7.5)):
        assert starved_reason(cpu, wait) is None
    assert starved_reason(10.0, STARVED_WAIT_OF_RUN * 10.0) is not None  # at both limits: starved
    assert starved_reason(10.0, STARVED_WAIT_OF_RUN * 10.0 - 0.1) is None
    assert starved_reason(5.5, STARVED_WAIT_PCT - 0.1) is None  # a long wait of little: under a tenth of the step
    # a generator with little to do: 1 user at 3 % CPU waited 29 % on a busy machine, its capacity measured right
    assert starved_reason(3.0, 29.0) is None and starved_reason(STARVED_MIN_CPU_PCT, 29.0) is None
    assert starved_reason(STARVED_MIN_CPU_PCT + 0.1, 29.0) is not None
    assert starved_reason(None, 50.0) is None and starved_reason(8.0, None) is None  # not measured (not Linux)


def starved_quietly(n=10, cpu=7.5, wait=16.4, p50_ms=29):
    """The starved pattern measured beside 6 CPU hogs (16 users): the loop's timer wakes on time (100
    samples a second, p99 about 7 ms, behind 8 % of the time), while the client waits for a CPU twice
    as long as it runs: the lag rule and CPU + wait >= 90 % both read it as fine."""
    out = []
    for i in range(n):
        lagc = counts([300.0] * 98 + [7_000.0] * 2, interval_us=10_000.0)
        lagc.lag_us = 0.077 * lagc.span_us
        out.append(Second(t=1000.0 + i, users=16, spawning=False, requests=526, failures=0,
                          hist={p50_ms: 400, 40: 126}, client_cpu_pct=cpu, client_wait_pct=wait, loop_lag=lagc))
    return out


def test_a_client_starved_between_its_timers_wakeups_is_client_bound():
    step = measure_step(starved_quietly())
    assert step.loop_lag.p99_ms == 7.0 and step.loop_lag.lagging < LAGGING_LIMIT  # the lag rule passes it
    assert client_affected_reason(step.loop_lag, step.p50_ms) is None
    assert step.client_cpu_pct + step.client_wait_pct < 90  # ... and so does the CPU + wait rule
    assert step.client_bound and "waited for a CPU 16 %" in step.client_bound_reason
    verdict = run_verdict(None, [step_record(step)])
    assert verdict["status"] == "inconclusive" and "waited for a CPU" in verdict["reason"]
    quiet = measure_step(starved_quietly(cpu=19.0, wait=15.8))  # the client alone on its CPU, same busy machine
    assert not quiet.client_bound


def test_a_search_beside_a_starved_client_ends_inconclusive_naming_it():
    from sm_locust.plateau.search import PlateauSearch

    search = PlateauSearch(4, 64)
    search.first()
    decision = search.feed(measure_step(starved_quietly()))
    assert not decision.stop and decision.load == 4 and decision.extend  # measured again: it may pass
    decision = search.feed(measure_step(starved_quietly()))
    verdict = search.verdict()
    assert decision.stop and verdict.client_bound and verdict.inconclusive
    assert verdict.inconclusive_reason.startswith("the load generator was the bottleneck: it waited for a CPU ")
    assert "add workers" in verdict.inconclusive_reason and "(measured twice)" in verdict.inconclusive_reason
    # the record says which step is the re-measure, and why: a repeated load in steps[] is never a mystery
    records = [step_record(step) for step in search.steps]
    assert [(r["users"], r.get("measured_again")) for r in records] == [(16, None), (16, "client-bound")]
    assert step_line(2, records[1]).startswith("step 2: 16 users again (client-bound): ")


def test_the_e2e_tests_accept_only_a_verified_load_generator_verdict():
    """tests/starved.py, fed what a run really records: a starved step's INCONCLUSIVE passes, re-checked
    by the rule on the step's recorded figures; a wrong one (figures that do not meet it) fails."""
    import pytest

    from sm_locust.plateau.search import PlateauSearch
    from tests.starved import load_generator_verdict

    record = step_record(measure_step(starved_quietly()))
    constant = {"steps": [record], "verdict": run_verdict(None, [record])}
    assert load_generator_verdict(constant) is True
    search = PlateauSearch(4, 64)
    search.first()
    for _ in range(2):
        search.feed(measure_step(starved_quietly()))
    steps = [step_record(step) for step in search.steps]
    plateau = search.verdict().as_dict(search.steps)
    assert load_generator_verdict({"plateau": plateau, "steps": steps, "verdict": run_verdict(plateau, steps)})
    fine = step_record(measure_step(starved_quietly(cpu=19.0, wait=15.8)))
    assert load_generator_verdict({"steps": [fine], "verdict": run_verdict(None, [fine])}) is False
    wrong = {**record, "client_wait_pct": 12.0}  # said starved, but waited 12 % beside 7.5 % (1.6x): yes; 11: no
    assert load_generator_verdict({"steps": [wrong], "verdict": run_verdict(None, [wrong])})
    for wrong in ({**record, "client_wait_pct": 11.0}, {**record, "client_cpu_pct": 4.0}):
        with pytest.raises(AssertionError, match="do not meet the rule"):
            load_generator_verdict({"steps": [wrong], "verdict": run_verdict(None, [wrong])})
    # INCONCLUSIVE on other grounds is not the load generator's: the test asserts its own answer
    cut = {"steps": [fine], "verdict": {"status": "inconclusive", "reason": "interrupted by SIGINT"}}
    assert load_generator_verdict(cut) is False
    named = {"status": "inconclusive", "reason": "the load generator was the bottleneck: client CPU 95 % at 4 users"}
    with pytest.raises(AssertionError, match="no client-bound step"):  # said, but no step recorded it
        load_generator_verdict({"steps": [fine], "verdict": named})
    with pytest.raises(AssertionError):  # a verdict naming a reason no client-bound step recorded
        load_generator_verdict({"steps": [record], "verdict": named})


def test_a_verdict_the_load_generator_decided_names_it_once():
    """`bottleneck_reason`: the one wording; a step reason that opens on the load generator continues on
    'it' / 'its', and the fix is said once, up front unless the reason names it."""
    from sm_locust.measure.looplag import BOTTLENECK, bottleneck_reason, quotes_reason

    starved = starved_reason(7.5, 15.0)
    lagged = client_affected_reason(LoopLag(samples=500, p50_ms=5.0, p99_ms=40.0, max_ms=60.0, lagging=0.5), 50.0)
    assert starved is not None and lagged is not None
    assert bottleneck_reason(starved, FIX_WORKERS) == f"{BOTTLENECK}: it waited for a CPU{starved.split('a CPU', 1)[1]}"
    assert bottleneck_reason(lagged, FIX_WORKERS).startswith(f"{BOTTLENECK}: its event loop lagged p99 40 ms")
    assert bottleneck_reason("the client ran or waited for a CPU 97 % of the time", FIX_WORKERS) == (
        f"{BOTTLENECK} ({FIX_WORKERS}): it ran or waited for a CPU 97 % of the time")
    assert bottleneck_reason("client CPU 97 % >= 90 %", FIX_WORKERS) == (
        f"{BOTTLENECK} ({FIX_WORKERS}): client CPU 97 % >= 90 %")
    assert bottleneck_reason("", FIX_WORKERS) == f"{BOTTLENECK} ({FIX_WORKERS})"
    for reason in (starved, lagged):
        text = bottleneck_reason(reason, FIX_WORKERS)
        # the lead's subject replaces the reason's own: no more mentions than the reason had (its fix may name it)
        assert text.count("the load generator") == reason.count("the load generator") and text.count(FIX_WORKERS) == 1
        # the step's own reason is found in the verdict's, in this wording and in the one before it
        assert quotes_reason(text, reason) and quotes_reason(f"{BOTTLENECK}: {reason}", reason)
    assert not quotes_reason(bottleneck_reason(starved, FIX_WORKERS), lagged) and not quotes_reason("anything", "")
