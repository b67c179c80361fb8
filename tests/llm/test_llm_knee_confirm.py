"""The knee of a token search holds when measured again: its deciding steps (the knee, the first load
above it) are measured once more, the higher first, and replicates that disagree make the run
INCONCLUSIVE, saying why, never a confident other answer."""

from __future__ import annotations

from sm_locust.endpoint.llm import BatchModel
from sm_locust.measure.steady import measure_step
from sm_locust.measure.timeline import Second
from sm_locust.plateau.conditions import ErrorRate
from sm_locust.plateau.tokens import (
    BREAKS,
    MEETS,
    UNDECIDED,
    Bucket,
    TokenPlateauSearch,
    TokenSLO,
    TokenStep,
    _key,
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
