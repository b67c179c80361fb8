"""The knee of a token search holds when measured again: its deciding steps (the knee, the first load
above it) are measured once more, the higher first. A load that surely met the SLOs once and surely broke
one once is taken as breaking (a knee that did moves below it, confirmed once more); replicates that
disagree otherwise make the run INCONCLUSIVE, saying why, never a confident other answer."""

from __future__ import annotations

from sm_locust.endpoint.llm import BatchModel
from sm_locust.measure.steady import measure_step
from sm_locust.measure.timeline import Second
from sm_locust.plateau.conditions import ErrorRate, MaxInvocations
from sm_locust.plateau.tokens import (
    BREAKS,
    MEETS,
    UNDECIDED,
    Bucket,
    TokenPlateauSearch,
    TokenSLO,
    TokenStep,
    _key,
    broke_once,
    replicates_disagree,
    slo_decision,
)
from tests.llm.test_llm_plateau import MODEL, token_step

ITL_SLO = TokenSLO("itl", 95, 60.0)
BUSIER = BatchModel(max_sequences=16, step_ms=40.0, step_ms_per_seq=1.5, prefill_ms_per_token=0.0)  # ITL 40 + 1.5 u


def run(search: TokenPlateauSearch, first: BatchModel, again: BatchModel) -> tuple[list[int], list[int]]:
    """The loads of the search, and of its confirmation (measured on `again`: the machine after a drift)."""
    loads: list[int] = []
    confirming: list[int] = []
    decision = search.first()
    while not decision.stop:
        if decision.reason.startswith("confirming the knee"):
            confirming.append(decision.users)
        else:
            loads.append(decision.users)
        decision = search.feed(token_step(decision.users, again if confirming else first))
    return loads, confirming


def test_replicates_disagree_when_one_meets_and_the_other_breaks():
    at16, at16_again = token_step(16), token_step(16, BUSIER)
    assert (slo_decision(at16, [ITL_SLO]), slo_decision(at16_again, [ITL_SLO])) == (MEETS, BREAKS)
    assert replicates_disagree([(at16, token_step(16))], [ITL_SLO], [ITL_SLO]) is None  # the same answer
    reason = replicates_disagree([(at16, at16_again)], [ITL_SLO], [ITL_SLO])
    assert reason is not None and reason.startswith("the knee is not confirmed: its deciding steps disagree")
    assert "16 users: ITL p95 44 ms (meets), then ITL p95 64 ms (breaks)" in reason and "the machine drifted" in reason
    assert replicates_disagree([], [ITL_SLO], [ITL_SLO]) is None


def test_an_undecided_replicate_disagrees_only_when_its_interval_lies_apart():
    """A README run under load: 8 users read ITL p95 39.9 ms [38.1, 41.3], then 42.5 ms [39.9, 78.6] (a wide
    interval straddling 60 ms): the same answer, measured less precisely, not a contradiction."""
    first = windowed_step(8, 5, [0] * 9)  # every gap at 44 ms: surely under 60
    wide = windowed_step(8, 5, SLOW_IN_3_OF_9)  # p95 96 ms [44, 96]: straddles 60
    assert slo_decision(first, [ITL_SLO]) == MEETS and slo_decision(wide, [ITL_SLO]) == UNDECIDED
    assert replicates_disagree([(first, wide)], [ITL_SLO], [ITL_SLO]) is None
    apart = windowed_step(8, 5, SLOW_IN_3_OF_9, itl=50.0)  # [50, 96]: undecided, and wholly above the first's
    assert slo_decision(apart, [ITL_SLO]) == UNDECIDED
    assert ITL_SLO.interval(apart).low > ITL_SLO.interval(first).high
    assert "(meets), then ITL p95" in replicates_disagree([(first, apart)], [ITL_SLO], [ITL_SLO])


def test_a_knee_that_holds_on_its_replicates_is_confirmed_in_reverse_order():
    search = TokenPlateauSearch(1, 64, conditions=[ITL_SLO, ErrorRate(0.05)], extend_unstable=False)
    loads, confirming = run(search, MODEL, MODEL)
    verdict = search.verdict()
    knee = verdict.plateau.users
    above = min(u for u in loads if u > knee)
    assert confirming == [above, knee]  # the higher first: the reverse of their first order
    assert not verdict.inconclusive, verdict.inconclusive_reason
    assert sum(1 for s in search.steps if s.users == knee) == 2  # both replicates are in the run's steps


def test_a_knee_that_moves_between_replicates_is_inconclusive_with_the_reason():
    """The README's LLM case: 16 users held ITL p95 60 ms in the first pass (44 ms) and not measured again
    (64 ms on a busier machine): the run says so instead of answering 16 users once and 8 the next."""
    search = TokenPlateauSearch(1, 64, conditions=[ITL_SLO, ErrorRate(0.05)], extend_unstable=False)
    _, confirming = run(search, MODEL, BUSIER)
    verdict = search.verdict()
    assert len(confirming) == 2 and verdict.inconclusive
    assert "the knee is not confirmed: its deciding steps disagree" in verdict.inconclusive_reason
    assert "ITL p95 44 ms (meets), then ITL p95 64 ms (breaks)" in verdict.inconclusive_reason
    assert verdict.as_dict()["undecided"], "summary.json's plateau names the reason"


def test_confirm_false_stops_where_the_search_stops():
    search = TokenPlateauSearch(1, 64, conditions=[ITL_SLO], extend_unstable=False, confirm=False)
    _, confirming = run(search, MODEL, BUSIER)
    assert confirming == [] and not search.verdict().inconclusive


def windowed_step(users: int, answers_per_second: int, slow_per_second: list[int], itl: float = 44.0) -> TokenStep:
    """A step measured second by second (so its percentiles carry intervals): `answers_per_second`
    answers of 60 tokens each second, TTFT 200 ms, `slow_per_second[i]` of second i's token gaps at 96 ms,
    the others at `itl` ms."""
    per_second = []
    for slow in slow_per_second:
        bucket = Bucket(requests=answers_per_second, output_tokens=answers_per_second * 60,
                        server=answers_per_second, arrived=answers_per_second * 60.0)
        gaps = answers_per_second * 59
        bucket.hists["itl"] = {k: v for k, v in ((_key(itl), gaps - slow), (_key(96.0), slow)) if v}
        bucket.hists["ttft"] = {_key(200.0): answers_per_second}
        per_second.append((1.0, bucket))
    whole = Bucket()
    for _, b in per_second:
        whole.merge(b)
    timeline = [Second(t=i + 1.0, users=users, spawning=False, requests=answers_per_second, failures=0,
                       hist={2000: answers_per_second}) for i in range(len(slow_per_second))]
    base = measure_step(timeline, warmup_fraction=0.0, min_subwindow_s=1)
    return TokenStep.of(base, whole, float(len(per_second)), per_second=per_second)


SLOW_IN_3_OF_9 = [60, 0, 0, 0, 60, 0, 0, 60, 0]  # 6.8 % of the gaps slow, in 3 seconds: p95 96 ms, [44, 96]


def search_on(step_for) -> TokenPlateauSearch:
    search = TokenPlateauSearch(1, 64, conditions=[TokenSLO("ttft", 95, 1000.0), ITL_SLO], extend_unstable=False)
    decision = search.first()
    while not decision.stop:
        step = step_for(decision.users)
        step.undecided = search.undecided(step)
        decision = search.feed(step)
    return search


def test_no_acceptable_step_on_an_slo_the_lowest_load_could_not_decide_is_inconclusive():
    # 1 user: 4 answers in 4 s, a TTFT p95 from too few to decide; every higher load breaks ITL surely
    search = search_on(lambda users: windowed_step(1, 1, [0] * 4) if users == 1
                       else windowed_step(users, 5, [150] * 9))
    verdict = search.verdict()
    assert verdict.plateau is None and verdict.inconclusive
    assert verdict.inconclusive_reason.startswith("no load surely met the constraints: TTFT p95") and "at 1 user" in \
        verdict.inconclusive_reason
    # the lowest load surely breaks the SLO: "no acceptable step" is the endpoint's answer, not a doubt
    sure = search_on(lambda users: windowed_step(users, 5, [150] * 9)).verdict()
    assert sure.plateau is None and not sure.inconclusive, sure.inconclusive_reason


def search_by_measurement(itl_of, conditions=None) -> tuple[TokenPlateauSearch, list[int], list[str]]:
    """A search on steps of `users` answers a second for 9 s (output tokens/s = 60 x users: no plateau
    below the SLO), every token gap at `itl_of(users, n)` ms in the n-th measurement of that load (each
    interval [x, x]: surely one side of 60 ms). The loads run, and the reasons of the confirmation steps."""
    search = TokenPlateauSearch(1, 64, conditions=conditions or [ITL_SLO, ErrorRate(0.05)], extend_unstable=False)
    loads: list[int] = []
    reasons: list[str] = []
    decision = search.first()
    while not decision.stop:
        users = decision.users
        loads.append(users)
        if "confirming the knee" in decision.reason:
            reasons.append(decision.reason)
        step = windowed_step(users, users, [0] * 9, itl=itl_of(users, loads.count(users)))
        step.undecided = search.undecided(step)
        decision = search.feed(step)
    return search, loads, reasons


def knife_edge(users: int, n: int) -> float:
    """The README's case on the emulation: 5 users read one decode step (40 ms) when first measured, two
    (80 ms) on its replicate; 4 users and below always one, 6 and above always two."""
    return 40.0 if users < 5 or (users == 5 and n == 1) else 80.0


def test_broke_once_names_the_constraint_and_both_measurements_in_time_order():
    met, broke = windowed_step(5, 5, [0] * 9), windowed_step(5, 5, [0] * 9, itl=80.0)
    assert broke_once(met, broke, [ITL_SLO]) == ("5 users broke ITL p95 60 ms in one of two measurements "
                                                 "(44.0 ms, then 80.0 ms)")
    assert broke_once(broke, met, [ITL_SLO]).endswith("(80.0 ms, then 44.0 ms)")
    assert broke_once(met, met, [ITL_SLO]) is None and broke_once(broke, broke, [ITL_SLO]) is None
    wide = windowed_step(5, 5, SLOW_IN_3_OF_9)  # undecided: not a sure breach
    assert broke_once(met, wide, [ITL_SLO]) is None


def test_a_knee_that_broke_once_moves_below_it_and_is_confirmed_there():
    """5 users met ITL p95 60 ms when first measured and surely broke it on its replicate: 5 users do not
    reliably meet it, so the knee is 4 users (re-measured once, 5 users now its load above), not
    INCONCLUSIVE."""
    search, loads, reasons = search_by_measurement(knife_edge)
    verdict = search.verdict()
    assert not verdict.inconclusive, verdict.inconclusive_reason
    assert verdict.plateau.users == 4
    assert loads[-3:] == [6, 5, 4] and loads.count(4) == 2 and loads.count(5) == 2  # one re-confirmation
    assert reasons[-1] == ("5 users broke ITL p95 60 ms in one of two measurements (40.0 ms, then 80.0 ms): "
                           "confirming the knee at 4 users: measuring 4 users again")
    assert verdict.reason == "5 users broke ITL p95 60 ms in one of two measurements (40.0 ms, then 80.0 ms)"
    assert verdict.reason in verdict.text()
    assert verdict.plateau is [s for s in search.steps if s.users == 4][0]  # the replicate agreed: first kept
    fives = [s for s in search.steps if s.users == 5]
    assert search._by_load[5] is fives[1]  # the breaking measurement is the one kept


def test_a_load_above_the_knee_that_broke_once_leaves_the_knee_standing():
    """The knee's own measurements agree; 6 users broke ITL first, then met it: 6 users do not reliably
    meet it, so the knee stays 5 users, with no further step, and the verdict says why."""
    search, loads, reasons = search_by_measurement(lambda u, n: 40.0 if u <= 5 or (u == 6 and n == 2) else 80.0)
    verdict = search.verdict()
    assert not verdict.inconclusive, verdict.inconclusive_reason
    assert verdict.plateau.users == 5 and loads[-2:] == [6, 5] and len(reasons) == 2
    assert verdict.reason == "6 users broke ITL p95 60 ms in one of two measurements (80.0 ms, then 40.0 ms)"
    assert search._by_load[6] is [s for s in search.steps if s.users == 6][0]


def test_a_moved_knee_whose_replicates_disagree_too_is_inconclusive_after_one_reconfirmation():
    search, loads, _ = search_by_measurement(lambda u, n: 40.0 if u < 4 or (u in (4, 5) and n == 1) else 80.0)
    verdict = search.verdict()
    assert verdict.inconclusive and loads[-3:] == [6, 5, 4] and loads.count(3) == 0  # no second move
    assert verdict.inconclusive_reason == (
        "5 users broke ITL p95 60 ms in one of two measurements (40.0 ms, then 80.0 ms), so the knee moved "
        "below it; then the knee is not confirmed: 4 users broke ITL p95 60 ms in one of two measurements (40.0 "
        "ms, then 80.0 ms): the machine drifted between the replicates beyond the steps' intervals; measure on "
        "a quieter machine or with longer --step-seconds")
    assert verdict.plateau.users == 4  # where the measurements before the last round put it, said INCONCLUSIVE


def test_a_knee_that_broke_once_with_no_acceptable_load_below_is_inconclusive():
    search, loads, _ = search_by_measurement(lambda u, n: 40.0 if u == 1 and n == 1 else 80.0)
    verdict = search.verdict()
    assert verdict.inconclusive and loads.count(1) == 2 and loads[-1] == 1
    assert verdict.inconclusive_reason.startswith("the knee is not confirmed: its deciding steps disagree between "
                                                  "replicates (1 user: ITL p95 40.0 ms (meets), then ITL p95 80.0 "
                                                  "ms (breaks))")


def test_a_knee_whose_replicate_is_undecided_and_apart_stays_inconclusive():
    """Not a sure breach: the replicate's interval straddles the SLO, wholly above the first's. No
    measurement settles that, so nothing moves."""
    def step_of(users: int, n: int) -> TokenStep:
        if users == 5 and n == 2:
            return windowed_step(5, 5, SLOW_IN_3_OF_9, itl=50.0)  # [50, 96]
        return windowed_step(users, users, [0] * 9, itl=knife_edge(users, 1))

    search = TokenPlateauSearch(1, 64, conditions=[ITL_SLO, ErrorRate(0.05)], extend_unstable=False)
    loads: list[int] = []
    decision = search.first()
    while not decision.stop:
        loads.append(decision.users)
        step = step_of(decision.users, loads.count(decision.users))
        step.undecided = search.undecided(step)
        decision = search.feed(step)
    verdict = search.verdict()
    assert verdict.inconclusive and loads[-2:] == [6, 5] and loads.count(4) == 1
    assert "5 users: ITL p95 40.0 ms (meets), then ITL p95" in verdict.inconclusive_reason
    assert "(undecided)" in verdict.inconclusive_reason and verdict.plateau.users == 5


def test_a_budget_that_fires_on_the_knee_replicate_moves_the_knee_without_measuring_it_again():
    # the steps before the confirmation send 49 users x 9 answers = 441 requests, 6 then 5 users 99 more
    search, loads, _ = search_by_measurement(knife_edge, [ITL_SLO, ErrorRate(0.05), MaxInvocations(540)])
    verdict = search.verdict()
    assert sum(s.total_requests for s in search.steps) == 540 and loads[-2:] == [6, 5] and loads.count(4) == 1
    assert verdict.plateau.users == 4 and verdict.stop_reason.startswith("max invocations 540 reached")
    assert verdict.reason == "5 users broke ITL p95 60 ms in one of two measurements (40.0 ms, then 80.0 ms)"
