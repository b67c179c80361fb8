"""The async result model on synthetic calls: poll schedule, resolution, histograms, backlog."""

from __future__ import annotations

import pytest

from sm_locust.measure.uncertainty import percentile_cis
from sm_locust.plateau.asyncresults import (
    RESULT,
    AsyncCall,
    PollSchedule,
    awaited_at,
    backlog_series,
    result_histograms,
)


def test_schedule_backs_off_to_its_ceiling_and_ends_at_the_timeout():
    schedule = PollSchedule(first_ms=100, factor=2, max_ms=400)
    assert [schedule.delay_ms(n) for n in range(5)] == [100, 200, 400, 400, 400]
    delays = list(schedule.delays(1500))
    assert delays == [100, 200, 400, 400, 400]  # 1500 reached exactly: no extra poll
    assert sum(delays) == 1500
    assert list(schedule.delays(1000)) == [100, 200, 400, 300]  # the last poll lands on the timeout
    assert list(PollSchedule(50, 1, 50).delays(120)) == [50, 50, 20]


def test_resolution_is_the_delay_before_the_poll_that_found_it():
    schedule = PollSchedule(first_ms=100, factor=2, max_ms=400)
    assert [schedule.resolution_ms(p) for p in (1, 2, 3, 4, 9)] == [100, 200, 400, 400, 400]


@pytest.mark.parametrize("bad", [dict(first_ms=0), dict(factor=0.5), dict(first_ms=500, max_ms=100)])
def test_schedule_refuses_what_cannot_poll(bad):
    with pytest.raises(ValueError):
        PollSchedule(**bad)


def test_time_to_result_only_for_results():
    ok = AsyncCall(sent_s=1.0, accepted_s=1.02, seen_s=3.5, outcome=RESULT, polls=4, resolution_ms=400)
    failed = AsyncCall(1.0, 1.01, 2.0, "AsyncFailure: boom", 2, 200)
    awaited = AsyncCall(1.0, 1.01)
    assert ok.time_to_result_ms == pytest.approx(2500)
    assert ok.acceptance_ms == pytest.approx(20)
    assert failed.time_to_result_ms is None and awaited.time_to_result_ms is None
    assert AsyncCall.from_tuple(ok.as_tuple()) == ok
    assert AsyncCall.from_tuple(awaited.as_tuple()) == awaited


def test_histograms_by_the_second_the_result_was_seen_in_locust_buckets():
    calls = [AsyncCall(0.0, 0.01, 0.5, RESULT), AsyncCall(0.2, 0.21, 2.7, RESULT),
             AsyncCall(1.0, 1.01, 2.2, RESULT), AsyncCall(1.0, 1.01, 1.5, "AsyncTimeout"),
             AsyncCall(2.0, 2.01)]
    assert result_histograms(calls) == [{500: 1}, {}, {2500: 1, 1200: 1}]
    assert result_histograms([AsyncCall(0.0, 0.01)]) == []


def test_histograms_feed_the_intervals_and_contain_the_true_median():
    # 60 s, one result a second, the time to result 500 + 10 * (i % 7) ms: median 530, p95 560
    calls = [AsyncCall(float(i), i + 0.01, i + 0.5 + 0.01 * (i % 7), RESULT) for i in range(60)]
    hists = result_histograms(calls)
    assert sum(sum(h.values()) for h in hists) == 60
    cis = percentile_cis(hists, [50, 95])
    assert cis[50.0].known and cis[50.0].contains(530)
    assert cis[95.0].contains(560)


def test_backlog_grows_when_results_lag_the_arrivals():
    # two calls a second for 10 s, each result seen 3 s later: the backlog settles at 6
    calls = [AsyncCall(t / 2, t / 2 + 0.01, t / 2 + 3.0, RESULT) for t in range(20)]
    series = backlog_series(calls, 0.0, 10.0)
    assert series[:4] == [2, 4, 6, 6]
    assert max(series) == 6
    assert len(series) == 10
    assert series[-1] == 6 and awaited_at(calls, 10.0) == 5  # at 10.0 exactly, the result due then is seen
    assert backlog_series(calls, 0.0, 14.0)[-4:] == [4, 2, 0, 0]  # after the arrivals stop the backlog drains


def test_backlog_counts_calls_never_answered_to_the_end():
    calls = [AsyncCall(float(t), t + 0.01) for t in range(5)]
    assert backlog_series(calls, 0.0, 6.0) == [1, 2, 3, 4, 5, 5]
    assert awaited_at(calls, 6.0) == 5
    # sent before the stop with its 202 after it, or sent while the stop reached the users: awaited
    # all the same (the endpoint answers them), so accepted = results + failures + awaited
    assert awaited_at([AsyncCall(2.4, 2.7)], 2.5) == 1 and awaited_at([AsyncCall(2.6, 2.7)], 2.5) == 1
    answered = [AsyncCall(1.0, 1.1, 2.0, RESULT), AsyncCall(1.0, 1.1, 2.4, "AsyncFailure: x")]
    assert awaited_at(answered, 2.5) == 0 and awaited_at(answered, 2.2) == 1
