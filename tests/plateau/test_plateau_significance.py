"""Decisions on intervals, not points: sequential steps, SLOs and growth judged on their 95 % intervals,
a contradicting step measured again, and what stays undecided said INCONCLUSIVE (synthetic seconds)."""

from __future__ import annotations

import pytest

from sm_locust.measure.steady import measure_step
from sm_locust.measure.timeline import Second
from sm_locust.measure.uncertainty import UNKNOWN, Interval
from sm_locust.plateau.conditions import LatencySLO, ThroughputGain
from sm_locust.plateau.driver import SearchDriver
from sm_locust.plateau.search import PlateauSearch, StepSearch
from sm_locust.plateau.significance import ABOVE, BELOW, UNDECIDED, growth_interval, min_count, precise, side
from sm_locust.plateau.synthetic import SyntheticEndpoint, synthetic_step
from sm_locust.plateau.tokens import Bucket, TokenPlateauSearch, TokenSLO, TokenStep, _key
from tests.plateau.feed import feed


def seconds_of(users: int, counts: list[int], hists: list[dict[int, int]] | None = None, t0: float = 0.0):
    return [Second(t=t0 + i + 1, users=users, spawning=False, requests=n, failures=0,
                   hist=(hists[i] if hists else {20: n})) for i, n in enumerate(counts)]


def window_step(users: int, counts: list[int], hists=None, t0: float = 0.0):
    """A step measured from its own seconds (all of them steady: no warm-up dropped)."""
    return measure_step(seconds_of(users, counts, hists, t0), warmup_fraction=0.0, min_subwindow_s=1)


def test_the_pure_rules():
    assert (min_count(50), min_count(95), min_count(99)) == (10, 20, 100)
    assert side(Interval(61, 90), 60) == ABOVE and side(Interval(30, 60), 60) == BELOW
    assert side(Interval(41, 96), 60) == UNDECIDED and side(UNKNOWN, 60) == UNDECIDED
    assert precise(100, Interval(96, 104), 0.05) and not precise(84, Interval(58, 110), 0.05)
    assert not precise(100, UNKNOWN, 0.05)
    growth = growth_interval(103, Interval(100, 106), 100, Interval(97, 103))
    assert growth.low < 0.03 < growth.high
    assert growth.high - growth.low == pytest.approx(2 * 1.03 * ((3 / 103) ** 2 + 0.03 ** 2) ** 0.5)
    assert growth_interval(103, UNKNOWN, 100, Interval(97, 103)) == UNKNOWN


def test_an_slo_breach_needs_the_percentiles_whole_interval_above_it():
    # every other second's slow tail is at 60 or 100 ms: p95 of the window lies between, its interval wide
    hists = [{20: 90, (60 if i % 2 else 100): 10} for i in range(16)]
    step = window_step(8, [100] * 16, hists)
    ci = step.percentile_interval(95)
    assert ci.known and ci.low <= 60 and ci.high >= 100
    straddled = LatencySLO(95, 80)
    assert straddled.violation(step) is None  # the point may be above 80: no breach on a point
    assert "straddles SLO 80 ms" in straddled.undecided(step)
    assert LatencySLO(95, 50).violation(step).startswith("p95 ")  # the whole interval above 50: a breach
    assert LatencySLO(95, 150).violation(step) is None and LatencySLO(95, 150).undecided(step) is None
    # a step past its budget with the SLO undecided is not acceptable: it bounds the plateau and says why
    search = PlateauSearch(8, 64, conditions=[straddled])
    search.first()
    step.undecided = search.undecided(step)
    assert any("straddles" in r for r in step.undecided)
    decision = search.feed(step)
    assert not decision.stop and decision.load == 16  # the next load decides: growth goes on
    assert search._violation(step).startswith("undecided: p95")  # until then it is not acceptable
    assert search.verdict().plateau is None


def test_a_percentile_from_too_few_requests_decides_nothing():
    few = synthetic_step(4, 0.5, duration_s=20, p95_ms=30)  # 10 requests: a p95 needs 20 (one beyond it)
    slo = LatencySLO(95, 100)
    assert slo.violation(few) is None and slo.undecided(few) == "p95 30 ms from 10 samples (needs 20)"
    assert LatencySLO(95, 100).undecided(synthetic_step(4, 1, duration_s=20, p95_ms=30)) is None


def test_throughput_stopped_growing_only_when_the_growths_interval_is_below_the_tolerance():
    gain = ThroughputGain(window=2)
    flat = [window_step(8, [100, 101, 99, 100] * 3), window_step(16, [101, 100, 100, 101] * 3)]
    assert gain.check(flat).startswith("throughput gain < 5 % over 2 steps (+")
    noisy_base = window_step(8, [100, 100, 100, 100] * 3)
    noisy = window_step(16, [70, 130, 80, 125, 75, 120, 90, 112, 85, 110, 95, 105])
    assert gain.less_precise([noisy_base, noisy]) is noisy
    assert gain.undecided([noisy_base, noisy], noisy) is not None  # measuring it longer can decide: hold it
    assert gain.undecided([noisy_base, noisy], noisy_base) is None  # the precise one cannot narrow it
    assert "on its point only" in gain.check([noisy_base, noisy])  # taken on its point, and said so


def test_a_stop_on_a_straddling_gain_measures_the_less_precise_step_again_once():
    search = PlateauSearch(8, 64, use_model=False)  # doubles: 8, then 16
    search.first()
    nxt = search.feed(window_step(8, [100, 100, 100, 100] * 3))
    assert nxt.load == 16
    noisy = [70, 130, 80, 125, 75, 120, 90, 112, 85, 110, 95, 105]
    again = search.feed(window_step(16, noisy))
    assert again.load == 16 and again.extend and "measuring 16 users again" in again.reason
    between = search.feed(window_step(16, noisy))  # as noisy again: a load between the two is measured
    assert between.load == 12 and not between.extend and "measuring 12 between them" in between.reason
    above = search.feed(window_step(12, noisy))  # as noisy there too: one load above the highest is measured
    assert above.load == 32 and "measuring 32 above it" in above.reason
    stop = search.feed(window_step(32, noisy))  # as noisy there: decided on its point, and the verdict says so
    assert stop.stop and "on its point only" in stop.reason
    assert [m.load for m in search.steps] == [8, 16, 16, 12, 32]  # nothing more measured after the step above
    verdict = search.verdict()
    assert verdict.inconclusive and "the search stopped on throughput gain < 5 %" in verdict.inconclusive_reason


def test_a_growth_at_the_threshold_is_decided_by_a_load_between_the_two_steps():
    """4 slots read 92 req/s at the lower step (the client's own time per request keeps them from full)
    and 95.5 (±4 %) at twice the users: +3.8 % [-0.3, +7.9] straddles 5 %, measured twice. The plateau
    begins between them: the load between reads 96 and the growth from it, -0.5 % [-1.9, +0.9], decides
    (a CI run beside a load ended INCONCLUSIVE on the known-capacity endpoint before this)."""
    search = PlateauSearch(8, 64, use_model=False)
    search.first()
    assert search.feed(window_step(8, [90, 94, 91, 93] * 3)).load == 16
    moderate = [91, 100, 93, 98, 90, 101, 92, 99, 94, 97, 95, 96]
    assert search.feed(window_step(16, moderate)).extend  # measured again first
    between = search.feed(window_step(16, moderate))
    assert between.load == 12 and "from 8 to 16 straddles 5 %" in between.reason
    stop = search.feed(window_step(12, [96, 97, 95, 96] * 3))
    assert stop.stop and "on its point only" not in stop.reason and stop.reason.startswith("throughput gain < 5 %")
    verdict = search.verdict()
    assert verdict.reached and not verdict.inconclusive, verdict.text()
    assert [m.load for m in search.steps] == [8, 16, 16, 12]


def run_driver(driver, endpoint, limit=5000):
    feed(driver, endpoint, limit)
    return driver.search.verdict()


def test_steps_lengthen_only_while_their_figures_are_undecided():
    quiet = SearchDriver(PlateauSearch(1, 64), step_s=60, min_step_s=10, min_subwindow_s=1)
    verdict = run_driver(quiet, SyntheticEndpoint(concurrency=4, service_ms=40.0, overhead_ms=3.0, noise=0.01))
    assert verdict.reached and not verdict.inconclusive, verdict.text()
    assert all(m.duration_s <= 8 for m in quiet.measurements)  # decided at the 10-s minimum (8 s after warm-up)
    noisy = SearchDriver(PlateauSearch(1, 64), step_s=60, min_step_s=10, min_subwindow_s=1)
    verdict = run_driver(noisy, SyntheticEndpoint(concurrency=4, service_ms=40.0, overhead_ms=3.0, noise=0.2))
    assert any(m.duration_s > 8 for m in noisy.measurements)  # held past the minimum to decide
    assert all(m.t_end - m.t_start <= 60 for m in noisy.measurements)  # never past the budget
    assert all(m.undecided == [] for m in noisy.measurements if m.t_end - m.t_start < 60)


def test_a_capacity_known_to_worse_than_the_tolerance_is_inconclusive_not_the_answer():
    # 6-s budget, +-30 % per-second noise: the capacity step reads like "84 (±26)" and cannot be narrowed
    fixed = SearchDriver(PlateauSearch(1, 64), step_s=6, min_step_s=4, min_subwindow_s=1)
    verdict = run_driver(fixed, SyntheticEndpoint(concurrency=4, service_ms=40.0, overhead_ms=3.0, noise=0.3, seed=3))
    assert verdict.inconclusive and verdict.text().startswith("INCONCLUSIVE ("), verdict.text()
    assert "is not known to +-5 %" in verdict.inconclusive_reason or "undecided" in verdict.inconclusive_reason
    assert verdict.as_dict()["inconclusive"] is True


def test_a_step_that_contradicts_littles_law_is_measured_again_then_said_to_contradict_it():
    # the plateau reads 1,246 req/s at 32 and 64 users; the knee the model places reads 42 % low: Little's
    # law says fewer users cannot lose more than their share, so it is measured once more, then said
    def rate(load):
        return min(load * 50.0, 1246.0)

    search = PlateauSearch(1, 256)
    decision, seen = search.first(), []
    while not decision.stop:
        load = decision.load
        contradict = search.phase == "refine" and load < 32
        counts = [round(rate(load) * (0.58 if contradict else 1.0))] * 12
        seen.append((load, contradict, decision.extend))
        decision = search.feed(window_step(int(load), counts, t0=20.0 * len(seen)))
        if contradict and not seen[-1][2]:
            assert decision.load == load and decision.extend and "measuring it again" in decision.reason
    verdict = search.verdict()
    assert any(c for _, c, _ in seen), seen
    # what was measured, not a claim about the plateau: each step read under the model beyond its interval, twice
    # one clause, the claim said once, each step's reading after it
    assert verdict.inconclusive and verdict.inconclusive_reason.split("; ") == [
        "3 steps contradicted the closed-loop model, each measured twice: 24 users read 696.0 req/s, its 95 % "
        "interval 42 % under the 1200.0 the model predicts there (> 15 %)",
        "28 users read 723.0 req/s, its 95 % interval "
        "28 % under the 1004.4 that the 33 users step's 1,246.0 imply by Little's law",
        "30 users read 723.0 req/s, its 95 % interval "
        "33 % under the 1076.1 that the 33 users step's 1,246.0 imply by Little's law"], verdict.text()
    assert verdict.inconclusive_reason.count("contradicted") == 1
    # each step run again is marked so (summary.json's steps[].measured_again), and only those
    assert [step.measured_again is not None for step in search.steps] == [again for _, _, again in seen]
    assert "contradicted" in {step.measured_again for step in search.steps}


def test_an_unstable_step_extended_is_marked_as_its_loads_second_measurement():
    search = StepSearch(1, 2, 5, stop_at_knee=False)
    decision, loads = search.first(), []
    while not decision.stop:
        load = int(decision.load)
        loads.append(load)
        uneven = load == 3 and loads.count(3) == 1  # the first measurement at 3 users doubles in its first third
        counts = [100 * load if not uneven or i >= 4 else 50 * load for i in range(12)]
        decision = search.feed(window_step(load, counts, t0=20.0 * len(loads)))
    assert loads == [1, 3, 3, 5]
    assert [step.measured_again for step in search.steps] == [None, None, "unstable", None]


def test_the_knee_and_capacity_carry_intervals():
    search = PlateauSearch(1, 64)
    decision = search.first()
    while not decision.stop:
        load = int(decision.load)
        decision = search.feed(window_step(load, [min(load * 25, 100) + (i % 3) for i in range(12)]))
    verdict = search.verdict()
    record = verdict.as_dict()
    assert record["capacity_ci95"][0] <= record["capacity_rps"] <= record["capacity_ci95"][1]
    assert record["knee_ci95"][0] <= record["goodput_rps"] <= record["knee_ci95"][1]
    low, high = record["knee_loads"]
    assert low <= record["users"] <= high and record["undecided"] == []


def token_step(users: int, slow_gaps: list[int], answers_per_second: int = 5, rate: float = 300.0,
               itl: float = 44.0, slow: float = 96.0, jitter: float = 0.0):
    """A 9-s LLM step: each second's answers (60 tokens each) with `slow_gaps[i]` of its token gaps at
    `slow` ms, the others at `itl` ms; `rate` tokens arrive each second, `jitter` of it more, then less."""
    per_second = []
    for i, k in enumerate(slow_gaps):
        bucket = Bucket(requests=answers_per_second, output_tokens=answers_per_second * 60, server=answers_per_second,
                        arrived=rate * (1.0 + jitter * (-1) ** i))
        gaps = answers_per_second * 59
        bucket.hists["itl"] = {_key(itl): gaps - k, _key(slow): k} if k else {_key(itl): gaps}
        bucket.hists["ttft"] = {_key(200.0): answers_per_second}
        per_second.append((1.0, bucket))
    merged = Bucket()
    for _, b in per_second:
        merged.merge(b)
    seconds = seconds_of(users, [answers_per_second] * len(slow_gaps))
    base = measure_step(seconds, warmup_fraction=0.0, min_subwindow_s=1)
    return TokenStep.of(base, merged, float(len(per_second)), per_second=per_second)


def test_an_itl_slo_from_45_answers_is_undecided_not_passed_or_failed_on_its_point():
    # the README's LLM case: ITL p95 at 16 users read 96 ms in one run and 44 in the other against 60 ms
    slo = TokenSLO("itl", 95, 60.0)
    step = token_step(16, [60, 0, 0, 0, 60, 0, 0, 60, 0])  # 6.8 % of the gaps slow, in 3 seconds: p95 96 ms
    assert slo.violation(step) is None and "straddles SLO 60 ms" in slo.undecided(step)
    assert step.output_tokens_ci.known  # the headline tokens/s carries its interval
    search = TokenPlateauSearch(1, 64, conditions=[slo], extend_unstable=False)
    search.first()
    for users in (1, 4, 16):
        s = step if users == 16 else token_step(users, [0] * 9, rate=users * 20.0, itl=30.0, jitter=0.1)
        s.undecided = search.undecided(s)
        search.feed(s)
    verdict = search.verdict()
    assert verdict.plateau.users == 4 and verdict.inconclusive, verdict.text()
    assert "16 users still undecided at its step budget: ITL p95" in verdict.inconclusive_reason
    record = verdict.as_dict()
    assert record["output_tokens_per_s_ci95"] is not None and " (±" in verdict.text()


def test_the_support_record_round_trips_and_steps_say_what_they_left_undecided():
    from sm_locust.plateau.significance import Support
    from sm_locust.record.model import Plateau
    from sm_locust.record.summary import step_line, step_record

    support = Support(Interval(90.0, 96.0), (4.0, 6.0), ("16 users still undecided at its step budget: p95",),
                      ("5 users still undecided at its step budget: throughput gain",))
    read = Plateau.from_json(support.to_json())  # summary.json's one reader of these keys: record.model
    assert (list(read.knee_ci95), read.knee_loads, read.undecided, read.knee_undecided) == \
        ([90.0, 96.0], [4.0, 6.0], list(support.undecided), list(support.knee_undecided))
    assert Plateau.from_json(Support().to_json()).knee_loads is None
    step = window_step(4, [100] * 8)
    step.undecided = ["p95 30 ms from 50 samples (needs 100)"]
    assert step_record(step)["undecided"] == step.undecided == step.as_dict()["undecided"]
    assert step_line(1, step_record(step)).endswith("; undecided at the step budget: p95 30 ms from 50 samples "
                                                    "(needs 100)")
    step.undecided = []
    assert "undecided" not in step_line(1, step_record(step))


def test_an_slo_undecided_for_want_of_answers_does_not_stop_growth_and_a_higher_pass_vouches_for_it():
    # an LLM's first steps hold a handful of answers: a TTFT p95 from 5 of them decides nothing, yet the
    # search grows on; once a higher load surely meets the SLO, latency growing with load vouches for them
    slo = LatencySLO(95, 1000)
    search = PlateauSearch(1, 64, conditions=[slo], use_model=False)
    search.first()
    few = synthetic_step(1, 0.25, duration_s=20, p95_ms=90)  # 5 requests: a p95 needs 20
    assert slo.undecided(few) is not None
    nxt = search.feed(few)
    assert not nxt.stop and nxt.load == 2
    assert search._violation(few).startswith("undecided: ")
    search.feed(synthetic_step(2, 5.0, duration_s=20, p95_ms=120))  # 100 requests, surely under 1,000 ms
    assert search._violation(few) is None


def test_a_traffic_pattern_is_not_stopped_by_an_slo_it_cannot_decide_yet():
    from sm_locust.plateau.search import ScheduleSearch

    search = ScheduleSearch(1, 8, conditions=[LatencySLO(95, 100)])
    search.first()
    assert not search.follow(synthetic_step(1, 0.25, duration_s=20, p95_ms=90), 2).stop  # 5 requests: undecided
    assert search.follow(synthetic_step(2, 5.0, duration_s=20, p95_ms=400), 4).stop  # 100 requests, surely over
