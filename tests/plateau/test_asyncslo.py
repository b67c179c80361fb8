"""The async search's time-to-result SLO on synthetic queues: a verdict only when the percentile's
interval is wholly on one side of the SLO, awaited calls counted above it, undecided steps held
longer and then INCONCLUSIVE."""

from __future__ import annotations

import heapq

import numpy as np
import pytest

from sm_locust.plateau.asyncresults import RESULT, AsyncCall
from sm_locust.plateau.asyncsearch import BOUNDED, GROWS, AsyncRateSearch
from sm_locust.plateau.asyncslo import (
    BREACH,
    KEEPS,
    UNDECIDED,
    StepResults,
    TimeToResultSlo,
    above,
    judge_slo,
)
from sm_locust.plateau.synthetic import locust_bucket

P95_1S = TimeToResultSlo(95.0, 1000.0)


def queue_calls(rate_rps: float, seconds: float, workers: int, service_s: float, seed: int,
                lateness_s: float = 0.05) -> list[AsyncCall]:
    """An async endpoint's calls: Poisson arrivals (accepted at once), `workers` FIFO workers of
    `service_s` each, the result seen up to `lateness_s` after it was written (the poll)."""
    rng = np.random.default_rng(seed)
    t, free = 0.0, [0.0] * workers
    calls = []
    while True:
        t += rng.exponential(1.0 / rate_rps)
        if t >= seconds:
            return calls
        start = max(t, heapq.heappop(free))
        done = start + service_s
        heapq.heappush(free, done)
        calls.append(AsyncCall(t, t, done + rng.uniform(0, lateness_s), RESULT, 1, lateness_s * 1000))


def step_of(calls: list[AsyncCall], judged_at: float, slo: TimeToResultSlo, settle_s: int = 2) -> StepResults:
    """What the shape sees at `judged_at`: the calls ended by then, those still awaited by second of
    acceptance, the window [settle, judged_at - SLO)."""
    end = int(judged_at - slo.max_ms / 1000.0)
    ended = [c for c in calls if c.seen_s is not None and c.seen_s <= judged_at]
    awaited: dict[int, int] = {}
    for call in calls:
        if call.seen_s is None or call.seen_s > judged_at:
            awaited[int(call.accepted_s)] = awaited.get(int(call.accepted_s), 0) + 1
    return StepResults.of(ended, settle_s, end, awaited)


def fixed(values_ms: list[float], per_second: int = 10) -> StepResults:
    hists: list[dict[int, int]] = []
    for i, ms in enumerate(values_ms):
        if i % per_second == 0:
            hists.append({})
        bucket = locust_bucket(ms)
        hists[-1][bucket] = hists[-1].get(bucket, 0) + 1
    return StepResults(tuple(hists))


def test_wholly_below_keeps_wholly_above_breaks_straddling_is_undecided():
    rng = np.random.default_rng(1)
    fast = fixed(list(rng.uniform(250, 350, 300)))
    assert judge_slo(P95_1S, fast).verdict == KEEPS
    assert judge_slo(TimeToResultSlo(95.0, 200.0), fast).verdict == BREACH
    judged = judge_slo(TimeToResultSlo(95.0, 340.0), fast)  # the p95 itself: the interval straddles it
    assert judged.interval.contains(340.0) and judged.verdict == UNDECIDED
    assert "straddles the SLO 340 ms" in judged.reason()


def test_too_few_calls_decide_nothing():
    judged = judge_slo(P95_1S, fixed([100.0] * 12))
    assert judged.verdict == UNDECIDED and "from 12 calls (needs 20)" in judged.reason()
    assert judge_slo(P95_1S, StepResults(())).verdict == UNDECIDED


def test_awaited_calls_older_than_the_slo_count_above_it():
    results = fixed([100.0] * 190)
    assert judge_slo(P95_1S, results).verdict == KEEPS
    spread = (2,) + (1,) * 18  # 20 of 210 (9.5 %) past the SLO: the p95 is above it
    late = StepResults(results.hists, 20, spread)
    judged = judge_slo(P95_1S, late)
    assert judged.verdict == BREACH and judged.value_ms == above(1000.0) > 1000.0
    assert (judged.results, judged.awaited) == (190, 20) and "20 awaited past it" in judged.reason()
    record = judged.as_dict()
    assert (record["slo"], record["awaited"], record["slo_ms"]) == (BREACH, 20, 1000.0)
    assert [above(v) for v in (50, 99, 100, 995, 1000, 9000, 20000)] == [51, 100, 110, 1100, 1100, 9100, 21000]


def test_the_window_takes_the_calls_accepted_in_it_and_counts_the_rest_awaited():
    calls = [AsyncCall(1.0, 1.0, 1.2, RESULT), AsyncCall(2.5, 2.5, 2.8, RESULT),
             AsyncCall(3.5, 3.5, 3.9, "AsyncFailure: x"), AsyncCall(6.0, 6.0, 6.1, RESULT)]
    step = StepResults.of(calls, 2, 5, {1: 3, 2: 1, 4: 1, 5: 7})  # the failure is no time to result
    assert step.results == 1 and step.awaited == 2 and len(step.hists) == 3
    assert step.hists == ({300: 1}, {}, {}) and step.awaited_per_second == (1, 0, 1)


@pytest.mark.parametrize("seed", range(5))
def test_a_queue_well_within_the_slo_keeps_it_and_one_past_it_breaks_it(seed):
    # 2 workers of 200 ms: at 6 req/s the p95 time to result is well under a second ...
    calls = queue_calls(6, 30, 2, 0.2, seed)
    assert judge_slo(P95_1S, step_of(calls, 30, P95_1S)).verdict == KEEPS
    # ... at 9.5 req/s the queue builds up over 60 s, and waits pass the second
    calls = queue_calls(9.5, 60, 2, 0.2, seed)
    slo = TimeToResultSlo(95.0, 300.0)
    assert judge_slo(slo, step_of(calls, 60, slo)).verdict == BREACH


def _search(search: AsyncRateSearch, seconds: float, seed: int = 0) -> None:
    """Run the search on the synthetic queue (2 workers of 200 ms: 10 results/s), holding an
    undecided step longer as the shape does."""
    while search.stop_reason is None:
        extensions = 0
        while True:
            held = seconds * (1 + extensions)
            calls = queue_calls(search.rate_rps, held, 2, 0.2, seed)
            backlog = [sum(1 for c in calls if c.accepted_s <= s < (c.seen_s or 1e9)) for s in range(1, int(held) + 1)]
            judged = judge_slo(search.slo, step_of(calls, held, search.slo)) if search.slo else None
            if not search.extend(backlog, judged, extensions):
                break
            extensions += 1
        search.judge(backlog, judged, extensions)
        seed += 1


def test_the_search_stops_at_the_slo_before_the_backlog_grows():
    slo = TimeToResultSlo(95.0, 400.0)
    search = AsyncRateSearch(start_rps=2, step_rps=2, max_rps=20, slo=slo)
    _search(search, 40)
    last = search.steps[-1]
    assert last.slo is not None and last.slo.verdict == BREACH and last.slope.verdict != GROWS
    assert search.slo_breach_at_rps == last.rate_rps < 10  # below what the workers complete
    assert search.capacity_rps is not None and search.capacity_rps < last.rate_rps
    assert all(s.acceptable for s in search.steps if s.rate_rps <= search.capacity_rps)
    assert search.stop_reason.startswith(f"at {last.rate_rps:g} req/s the p95 time to result ")
    assert f"above the SLO 400 ms: capacity {search.capacity_rps:g} to {last.rate_rps:g} req/s" in search.stop_reason
    record = search.as_dict()
    assert record["slo_breach_at_rps"] == last.rate_rps and record["time_to_result_slo_ms"] == 400.0
    assert record["steps"][-1]["slo"] == BREACH and record["steps"][0]["slo"] == KEEPS
    # without the SLO the same queue runs on until its backlog grows, past 10 req/s
    plain = AsyncRateSearch(start_rps=2, step_rps=2, max_rps=20)
    _search(plain, 40)
    assert plain.grows_at_rps is not None and plain.grows_at_rps > search.slo_breach_at_rps
    assert "verdict" not in plain.as_dict()


def test_an_undecided_step_is_held_longer_then_the_search_is_inconclusive():
    slo = TimeToResultSlo(95.0, 1000.0)
    search = AsyncRateSearch(start_rps=5, step_rps=5, max_rps=5, slo=slo)
    flat = [3.0] * 30
    straddles = judge_slo(TimeToResultSlo(95.0, 340.0), fixed(list(np.random.default_rng(1).uniform(250, 350, 300))))
    assert straddles.verdict == UNDECIDED
    assert search.extend(flat, straddles, 0) and search.extend(flat, straddles, 1)
    assert not search.extend(flat, straddles, 2)  # its budget: twice more
    assert not search.extend(list(range(30)), straddles, 0)  # a growing backlog decides the step already
    step = search.judge(flat, straddles, 2)
    assert step.slope.verdict == BOUNDED and not step.acceptable and not step.stops
    assert search.capacity_rps is None and search.stop_reason.startswith("max rate 5 req/s reached")
    reason = search.inconclusive_reason
    assert reason is not None and "at 5 req/s" in reason and "after 2 extension(s)" in reason
    record = search.as_dict()
    assert record["verdict"] == "INCONCLUSIVE" and record["inconclusive_reason"] == reason
    assert record["steps"][0]["extensions"] == 2


def test_an_undecided_step_below_the_capacity_found_leaves_it_conclusive():
    slo = TimeToResultSlo(95.0, 1000.0)
    search = AsyncRateSearch(start_rps=1, step_rps=1, max_rps=2, slo=slo)
    keeps = judge_slo(slo, fixed([200.0] * 100))
    undecided = judge_slo(slo, fixed([200.0] * 12))
    search.judge([1.0] * 20, undecided, 2)
    search.judge([1.0] * 20, keeps)
    assert search.capacity_rps == 2 and search.inconclusive_reason is None
    assert search.as_dict()["verdict"] == "conclusive"


def test_the_slo_option_belongs_to_the_async_shape():
    from sm_locust.errors import UsageError
    from sm_locust.shapes.settings import ShapeSettings

    with pytest.raises(UsageError, match="--time-to-result-slo-ms is the async capacity search's SLO"):
        ShapeSettings(time_to_result_slo_ms=500.0).check("open")
    assert ShapeSettings(time_to_result_slo_ms=500.0).check("async").time_to_result_slo_ms == 500.0
    with pytest.raises(ValueError):
        TimeToResultSlo(95.0, 0.0)


@pytest.mark.parametrize(("awaited", "clause"), [(0, ""), (1, ", 1 awaited past it"), (2, ", 2 awaited past it")])
def test_the_breach_line_names_the_calls_still_awaited_past_the_slo(awaited, clause):
    """A step at 3 req/s whose results all took 130 ms, against a p50 SLO of 60 ms: the same breach and
    bracket whether or not a call accepted more than 60 ms before the judgment was still awaited then (a
    value surely above the SLO, counted just above it); the line says how many there were, and none when none."""
    slo = TimeToResultSlo(50.0, 60.0)
    judged = judge_slo(slo, StepResults(tuple({130: 3} for _ in range(9)), awaited, (0,) * 8 + (awaited,)))
    search = AsyncRateSearch(start_rps=3, step_rps=3, max_rps=3, slo=slo)
    search.judge([1.0, 0.0] * 4 + [1.0], judged)
    assert (judged.verdict, judged.results, judged.awaited) == (BREACH, 27, awaited)
    assert search.stop_reason == (f"at 3 req/s the p50 time to result 130 ms (95 % 130-130 ms) above the SLO 60 ms"
                                  f"{clause}: capacity below 3 req/s")
    assert search.as_dict()["steps"][0]["awaited"] == awaited
