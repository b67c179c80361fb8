"""The knee of a token search holds when measured again: its deciding steps (the knee, the first load
above it) are measured once more, the higher first, and a knee that moves between the replicates is
INCONCLUSIVE, saying why, never a confident other answer."""

from __future__ import annotations

from sm_locust.endpoint.llm import BatchModel
from sm_locust.plateau.conditions import ErrorRate
from sm_locust.plateau.tokens import TokenPlateauSearch, TokenSLO, knee_moved
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


def test_knee_moved_is_none_for_the_same_load_and_quotes_both_replicates_otherwise():
    at16, at16_again, at8 = token_step(16), token_step(16, BUSIER), token_step(8)
    assert knee_moved(at16, at16_again, [(at16, at16_again)], [ITL_SLO]) is None  # same load: confirmed
    reason = knee_moved(at16, at8, [(at16, at16_again)], [ITL_SLO])
    assert reason is not None and reason.startswith("the knee moved between replicates: 16 users at first, 8 users")
    assert "16 users: ITL p95 44 ms, then ITL p95 64 ms" in reason and "the machine drifted" in reason
    assert knee_moved(None, None, [], []) is None


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
    assert "the knee moved between replicates" in verdict.inconclusive_reason
    assert "ITL p95 44 ms, then ITL p95 64 ms" in verdict.inconclusive_reason
    assert verdict.as_dict()["undecided"], "summary.json's plateau names the reason"


def test_confirm_false_stops_where_the_search_stops():
    search = TokenPlateauSearch(1, 64, conditions=[ITL_SLO], extend_unstable=False, confirm=False)
    _, confirming = run(search, MODEL, BUSIER)
    assert confirming == [] and not search.verdict().inconclusive
