"""tests/undecided.py, the e2e tests' check of an INCONCLUSIVE left by the step budget, fed summary.json records
shaped as a real token plateau writes them (the README-like LLM emulation's run: 1, 4 and 8 users, the 8-user
step's growth over 4 users undecided at its budget): a claim the record bears out is accepted, one it does not
fails the test, and a verdict on other grounds is left to the test's own answer."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from sm_locust.plateau.asyncsearch import AsyncRateSearch
from sm_locust.plateau.asyncslo import StepResults, TimeToResultSlo, judge_slo
from sm_locust.plateau.synthetic import locust_bucket
from tests.undecided import async_budget_verdict, budget_verdict, verify_clause

GAIN_OPEN = "8 users still undecided at its step budget: throughput gain -0.4 % [-7.1, +6.2] straddles 5 %"


def _step(users, tokens_s, tokens_ci, **extra) -> dict:
    return {"users": users, "requests": 4, "failures": 0, "rps": 0.5, "goodput_rps": 0.5, "p95_ms": 7000.0,
            "stable": True, "client_cpu_pct": 6.0, "client_wait_pct": 1.0, "client_bound": False,
            "ci95": {"rps": [0.499, 0.5], "goodput_rps": [0.499, 0.5], "p95_ms": [6600.0, 7000.0]},
            "llm": {"requests": 4, "output_tokens": 384, "output_tokens_per_s": tokens_s, "itl_p95_ms": 73.6,
                    "ci95": {"itl_p95_ms": [73.3, 73.6], "output_tokens_per_s": tokens_ci}}, **extra}


def record(undecided=(GAIN_OPEN,), eight=(54.13, [50.97, 57.29]), eight_undecided=None) -> dict:
    """summary.json of a token plateau left INCONCLUSIVE by `undecided` (its 8-user step's own list:
    `eight_undecided`, the clause's reasons by default)."""
    reasons = eight_undecided if eight_undecided is not None else [GAIN_OPEN.partition("budget: ")[2]]
    steps = [_step(1, 20.599, [20.589, 20.609]), _step(4, 54.364, [52.599, 56.129]),
             _step(8, eight[0], eight[1], undecided=reasons)]
    reason = "; ".join(undecided)
    text = ("plateau: step 2: 54 (±2) output tokens/s at 4 users, TTFT p95 124 ms [99, 124], ITL p95 73.6 ms "
            "[73.3, 73.6] — throughput gain < 5 % over 2 steps (-0.4 % [-7.1, +6.2])")
    plateau = {"objective": "output-tokens", "users": 4, "reached": True, "client_bound": False,
               "capacity_load": 8, "capacity_output_tokens_per_s": eight[0],
               "capacity_output_tokens_per_s_ci95": eight[1], "undecided": list(undecided),
               "inconclusive": bool(undecided), "inconclusive_reason": reason or None,
               "text": f"INCONCLUSIVE ({reason}): {text}" if undecided else text}
    verdict = {"status": "inconclusive", "reason": reason} if undecided else {"status": "ok", "reason": None}
    return {"steps": steps, "plateau": plateau, "verdict": verdict}


def test_an_undecided_growth_the_record_bears_out_is_accepted():
    # the gain recomputed from the 4- and 8-user steps' recorded tokens/s intervals is the one quoted
    assert budget_verdict(record()) is True


def test_a_token_gain_holds_on_the_record_to_its_print_rounding_only():
    # the 8-user step's recorded interval 0.3 % of the gain wider each way than the one quoted: once taken as
    # the recorder's other cut of the step (within 15 % of the half-width), now a claim the record contradicts
    with pytest.raises(AssertionError, match="do not bear this out"):
        budget_verdict(record(eight=(54.13, [50.8, 57.46])))


def test_the_knees_and_capacitys_figures_are_their_steps_own():
    summary = record()
    summary["plateau"].update(knee_step=1, output_tokens_per_s=54.364, output_tokens_per_s_ci95=[52.599, 56.129],
                              capacity_step=2)
    assert budget_verdict(summary) is True
    summary["plateau"]["output_tokens_per_s_ci95"] = [52.2, 56.5]  # the verdict's interval, not the step's
    with pytest.raises(AssertionError, match="knee"):
        budget_verdict(summary)


def test_a_conclusive_run_is_left_to_the_test():
    assert budget_verdict(record(undecided=())) is False


def test_a_growth_whose_recorded_interval_does_not_straddle_the_line_is_rejected():
    # the same words over an 8-user step measured to +-3 %: its growth is -0.4 % [-4.8, +3.9], under 5 %
    with pytest.raises(AssertionError, match="do not bear this out"):
        budget_verdict(record(eight=(54.13, [52.55, 55.71])))


def test_a_quoted_interval_that_does_not_straddle_its_own_line_is_rejected():
    clause = "8 users still undecided at its step budget: throughput gain -0.4 % [-4.8, +3.9] straddles 5 %"
    with pytest.raises(AssertionError, match="does not straddle"):
        budget_verdict(record(undecided=(clause,), eight=(54.13, [52.55, 55.71]),
                              eight_undecided=[clause.partition("budget: ")[2]]))


def test_a_step_not_in_the_record_is_rejected():
    clause = GAIN_OPEN.replace("8 users", "16 users")
    with pytest.raises(AssertionError, match="does not hold"):
        budget_verdict(record(undecided=(clause,)))


def test_a_step_that_did_not_record_the_reason_is_rejected():
    with pytest.raises(AssertionError, match="left these undecided"):
        budget_verdict(record(eight_undecided=["goodput 54.1 (±3.2) not known to +-5 %"]))


def test_a_reason_naming_no_step_or_another_ground_is_not_accepted():
    # a reason naming no step is not one the budget leaves: the test asserts its full answer, and fails
    for clause in ("throughput gain -0.4 % [-7.1, +6.2] straddles 5 %",
                   "the knee is not confirmed: its deciding steps disagree"):
        assert budget_verdict(record(undecided=(clause,))) is False
        assert budget_verdict(record(undecided=(GAIN_OPEN, clause))) is False
    with pytest.raises(AssertionError, match="not an undecided-at-the-budget clause"):
        verify_clause(record(), "throughput gain -0.4 % [-7.1, +6.2] straddles 5 %")


def test_a_client_bound_verdict_is_not_this_one():
    summary = record()
    summary["plateau"]["client_bound"] = True
    assert budget_verdict(summary) is False


def test_a_percentile_straddling_its_slo_is_checked_against_the_recorded_interval():
    clause = "8 users still undecided at its step budget: ITL p95 61 ms [52, 68] straddles SLO 60 ms"
    summary = record(undecided=(clause,), eight_undecided=["ITL p95 61 ms [52, 68] straddles SLO 60 ms"])
    summary["steps"][2]["llm"]["ci95"]["itl_p95_ms"] = [52.2, 67.9]
    assert budget_verdict(summary) is True
    wrong = copy.deepcopy(summary)
    wrong["steps"][2]["llm"]["ci95"]["itl_p95_ms"] = [60.4, 67.9]  # wholly above 60 ms: a breach, not open
    with pytest.raises(AssertionError, match="do not bear this out"):
        budget_verdict(wrong)
    requests = "8 users still undecided at its step budget: p95 6,800 ms [6,600, 7,000] straddles SLO 6,900 ms"
    summary = record(undecided=(requests,), eight_undecided=[requests.partition("budget: ")[2]])
    assert budget_verdict(summary) is True
    summary["steps"][2]["ci95"]["p95_ms"] = [6950.0, 7000.0]
    with pytest.raises(AssertionError, match="do not bear this out"):
        budget_verdict(summary)


def test_too_few_samples_are_checked_against_the_recorded_count():
    reason = "p95 6,800 ms from 4 samples (needs 20)"
    summary = record(undecided=(f"8 users still undecided at its step budget: {reason}",), eight_undecided=[reason])
    assert budget_verdict(summary) is True
    summary["steps"][2]["requests"] = 40  # the record counts enough for a p95
    with pytest.raises(AssertionError, match="do not bear this out"):
        budget_verdict(summary)


def test_a_capacity_not_known_to_the_tolerance_is_checked_against_its_recorded_interval():
    clause = "the capacity 54.1 (±3.2) at 8 users is not known to +-5 % (lengthen --step-seconds)"
    assert budget_verdict(record(undecided=(clause,))) is True  # +-5.8 % recorded
    with pytest.raises(AssertionError, match="is known to"):
        budget_verdict(record(undecided=(clause,), eight=(54.13, [52.55, 55.71])))  # +-2.9 %
    with pytest.raises(AssertionError, match="capacity's load"):
        budget_verdict(record(undecided=(clause.replace("8 users", "16 users"),)))


def test_a_stop_on_a_point_is_checked_against_two_recorded_steps():
    clause = ("the search stopped on throughput gain < 5 % over 2 steps on its point only "
              "(-0.4 % [-7.1, +6.2]: its interval straddles it)")
    assert budget_verdict(record(undecided=(clause,))) is True
    with pytest.raises(AssertionError, match="no two recorded steps"):
        budget_verdict(record(undecided=(clause,), eight=(54.13, [52.55, 55.71])))


def _async_record(times_ms, slo_ms=340.0, few=False) -> dict:
    """summary.json's `async_search` as the search writes it, its one 5-req/s step held twice longer and
    still undecided against `slo_ms` (or, `few`, from too few calls for a p95)."""
    hists: list[dict[int, int]] = []
    for i, ms in enumerate(times_ms[:12] if few else times_ms):
        if i % 10 == 0:
            hists.append({})
        hists[-1][locust_bucket(ms)] = hists[-1].get(locust_bucket(ms), 0) + 1
    slo = TimeToResultSlo(95.0, slo_ms)
    search = AsyncRateSearch(start_rps=5, step_rps=5, max_rps=5, slo=slo)
    search.judge([3.0] * 30, judge_slo(slo, StepResults(tuple(hists))), 2)
    return {"async_search": search.as_dict()}


def test_an_async_slo_left_undecided_is_checked_against_the_recorded_interval():
    times = list(np.random.default_rng(1).uniform(250, 350, 300))
    summary = _async_record(times)
    assert summary["async_search"]["verdict"] == "INCONCLUSIVE"
    assert async_budget_verdict(summary) is True
    assert async_budget_verdict(_async_record(times, few=True)) is True  # 12 calls for a p95 that needs 20
    wrong = copy.deepcopy(summary)
    wrong["async_search"]["steps"][0]["time_to_result_ci95"] = [341.0, 350.0]  # wholly above: a breach
    with pytest.raises(AssertionError, match="do not bear this out"):
        async_budget_verdict(wrong)
    elsewhere = copy.deepcopy(summary)
    elsewhere["async_search"]["steps"][0]["rate_rps"] = 10.0  # the step named is not in the record
    with pytest.raises(AssertionError, match="no recorded step at 5 req/s"):
        async_budget_verdict(elsewhere)
    below = copy.deepcopy(summary)
    below["async_search"]["capacity_rps"] = 5.0
    with pytest.raises(AssertionError, match="not above the capacity"):
        async_budget_verdict(below)
    conclusive = _async_record([200.0] * 100, slo_ms=1000.0)
    assert conclusive["async_search"]["verdict"] == "conclusive" and async_budget_verdict(conclusive) is False
