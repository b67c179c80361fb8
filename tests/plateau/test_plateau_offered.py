"""An open-loop step whose load generator did not offer its rate is client-bound (measure.steady
`undelivered_reason`): the sends it scheduled, dropped at the in-flight cap included, wholly under
`MIN_OFFERED_RATIO` of the intended rate. A saturated endpoint filling the cap is not (its capacity is the
rate search's to see); a short user count alone, or lumpy worker reports, decide nothing. The rate search
measures such a step again, then ends INCONCLUSIVE naming the load generator and its fix."""

from __future__ import annotations

import pytest

from sm_locust.measure.looplag import FIX_WORKERS
from sm_locust.measure.steady import MIN_OFFERED_RATIO, measure_step
from sm_locust.measure.timeline import Second
from sm_locust.plateau.search import PLATEAU_TOLERANCE, PlateauSearch
from sm_locust.record.summary import run_verdict, step_line, step_record
from sm_locust.sweep.trust import untrusted_words


def open_seconds(n: int = 12, *, asked: int = 64, running: int | list[int] = 64, sent: int | list[int] | None = None,
                 dropped: int = 0, done: int | None = None, t0: float = 1000.0) -> list[Second]:
    """`n` one-second samples of an open loop asked for `asked` req/s (1 req/s per rate token): `running`
    tokens ran, the generator sent `sent` (default: one per running token, less the `dropped` at the cap)
    and `done` completed (default: all it sent)."""
    users = running if isinstance(running, list) else [running] * n
    out = []
    for i in range(n):
        sends = sent[i] if isinstance(sent, list) else sent if sent is not None else users[i] - dropped
        completed = sends if done is None else done
        out.append(Second(t=t0 + i + 1, users=users[i], spawning=False, requests=completed, failures=0,
                          hist={20: completed}, target_rate=float(asked), target_users=asked, sent=sends, late=0,
                          dropped=dropped))
    return out


def measure(seconds: list[Second], **kwargs):
    return measure_step(seconds, mode="rate", min_subwindow_s=1, **kwargs)


def test_a_generator_that_ran_fewer_tokens_than_asked_for_is_client_bound():
    step = measure(open_seconds(running=41))  # sends on time (late 0), at the 41 tokens' rate
    assert (step.users, step.users_running, step.late_fraction) == (64, 41, 0.0)
    reason = step.client_bound_reason
    assert step.client_bound and reason is not None
    assert reason.startswith("the load generator ran as few as 41 of the 64 users asked for and offered 41.0 req/s")
    assert reason.endswith(f"({FIX_WORKERS})") and "64 req/s asked for (64 %, < 95 %)" in reason
    assert untrusted_words(reason, short=True) == "the load generator was the bottleneck"  # the sweep's word too
    record = step_record(step)  # the figures the rule read, recorded beside it
    assert record["client_bound"] is True and record["offered_rps"] == 41.0
    assert record["offered_ci95"][1] < MIN_OFFERED_RATIO * record["target_rate"]
    assert "CLIENT-BOUND: the load generator ran as few as 41" in step_line(1, record)


def test_tokens_counted_running_that_did_not_send_are_client_bound_too():
    # every token counted (a greenlet before its on_start, a master's count), but only 40 req/s scheduled
    step = measure(open_seconds(running=64, sent=40))
    assert step.users_running is None and step.client_bound
    assert step.client_bound_reason.startswith("the load generator offered 40.0 req/s [40.0, 40.0] of the 64 req/s")


def test_a_saturated_endpoint_filling_the_in_flight_cap_is_not_client_bound():
    # every token ran and every send was scheduled: 34 a second dropped at the cap, 30 completed
    step = measure(open_seconds(running=64, dropped=34, done=30))
    assert step.dropped_fraction == pytest.approx(34 / 64) and step.offered_rps == 64.0
    assert not step.client_bound and not step.offered_short
    assert PlateauSearch.served_ratio(step) == pytest.approx(30 / 64)  # the search sees the endpoint's shortfall
    record = step_record(step)
    assert record["client_bound"] is False and "offered_rps" not in record and "offered_ci95" not in record


def test_a_short_user_count_alone_decides_nothing():
    # one second's sample short of tokens (a lagging report), the sends all there: the endpoint's step
    step = measure(open_seconds(running=[64] * 11 + [41], sent=64))
    assert step.users_running == 41 and step.offered_rps == 64.0 and not step.client_bound


def test_the_offers_interval_decides_not_its_point():
    # a master's sends arrive with each worker's report, every 3 s: the window's mean is short (57.6 of 64),
    # its interval is not wholly under 95 %: not decided, not client-bound (but recorded as short)
    lumpy = measure(open_seconds(10, sent=[0, 0, 192] * 3 + [0]), warmup_fraction=0)
    assert lumpy.offered_rps == pytest.approx(57.6) and lumpy.offered_short
    assert lumpy.offered_ci.high > MIN_OFFERED_RATIO * 64 and not lumpy.client_bound
    assert step_record(lumpy)["offered_rps"] == 57.6
    steady = measure(open_seconds(10, sent=57), warmup_fraction=0)  # the same shortfall every second
    assert steady.client_bound and "57.0 req/s [57.0, 57.0]" in steady.client_bound_reason


def test_no_sends_counted_is_not_an_offer_of_none():
    step = measure(open_seconds(sent=0, done=64))  # counts that never arrived, while 64 req/s completed
    assert step.offered_rps is None and not step.client_bound


def test_the_offer_threshold_is_the_rate_searchs_served_rule():
    assert MIN_OFFERED_RATIO == pytest.approx(1.0 - PLATEAU_TOLERANCE)


def test_the_rate_search_measures_it_again_then_ends_inconclusive_naming_the_generator():
    search = PlateauSearch(10, 1000, mode="rate")
    decision = search.first()
    rate = int(decision.load)
    again = search.feed(measure(open_seconds(asked=rate, running=rate * 6 // 10)))
    assert again.load == rate and "client-bound (the load generator ran as few as" in again.reason
    stop = search.feed(measure(open_seconds(asked=rate, running=rate * 6 // 10)))
    assert stop.stop and "measured twice" in stop.reason
    verdict = search.verdict()
    assert verdict.inconclusive and verdict.client_bound and verdict.plateau is None
    text = verdict.text()  # the fix said once: the reason names it
    assert text.startswith("INCONCLUSIVE: the load generator was the bottleneck: it ran as few as 6 of "
                           "the 10 users asked for") and text.count(FIX_WORKERS) == 1


def test_the_e2e_tests_accept_the_offers_verdict_only_when_the_record_meets_its_rule():
    """tests/starved.py re-checks a client-bound step's rule on its recorded figures: the offer's interval."""
    from tests.starved import load_generator_verdict

    search = PlateauSearch(10, 1000, mode="rate")
    rate = int(search.first().load)
    for _ in range(2):
        search.feed(measure(open_seconds(asked=rate, running=rate // 2)))
    steps = [step_record(step) for step in search.steps]
    plateau = search.verdict().as_dict(search.steps)
    assert load_generator_verdict({"plateau": plateau, "steps": steps, "verdict": run_verdict(plateau, steps)})
    wrong = [{**step, "offered_ci95": [step["offered_rps"], MIN_OFFERED_RATIO * rate]} for step in steps]
    with pytest.raises(AssertionError, match="do not meet the rule"):
        load_generator_verdict({"plateau": plateau, "steps": wrong, "verdict": run_verdict(plateau, wrong)})
