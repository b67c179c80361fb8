"""A Locust worker lost mid-run: summary.json's verdict is INCONCLUSIVE when a step it rests on ended
after the loss (its users stopped with the worker), naming the worker and the fix; a loss after the
last judged step leaves the verdict as it was."""

from __future__ import annotations

from sm_locust.core.verdict import verdict_line
from sm_locust.measure.timeline import Second
from sm_locust.record.model import Step, Verdict, Workers
from sm_locust.record.summary import (
    LOST_WORKER_FIX,
    MISSING_SILENT_S,
    VERDICT_INCONCLUSIVE,
    VERDICT_OK,
    build_summary,
    lost_worker_verdict,
)

T0 = 1000.0  # the test's start


def two_steps(cpu: float | None = None) -> list[Second]:
    """Steps of 2 and 4 users, 20 s each: the first ends 20 s into the test, the second 40 s."""
    return [Second(t=T0 + i + 1, users=2 if i < 20 else 4, spawning=False, requests=100, failures=0,
                   hist={20: 95, 40: 5}, client_cpu_pct=cpu) for i in range(40)]


def summary(lost: list[dict], seconds: list[Second] | None = None) -> dict:
    seconds = seconds or two_steps()
    workers = {"expected": 2, "connected": 2, "at_end": 2 - len(lost), "lost": lost}
    return build_summary(endpoint="ep", started_at=T0, ended_at=seconds[-1].t, totals={"requests": 4000},
                         errors={}, seconds=seconds, extra={"workers": workers})


def test_a_worker_lost_during_the_second_step_makes_the_verdict_inconclusive_naming_it():
    lost = [{"id": "host_4f0c", "reason": "missing", "after_s": 31.2}]
    assert summary([])["verdict"] == {"status": VERDICT_OK, "reason": None}
    verdict = summary(lost)["verdict"]
    assert verdict["status"] == VERDICT_INCONCLUSIVE
    assert verdict["reason"] == (
        f"1 of 2 Locust workers lost (host_4f0c missing 31.2 s into the test) before step 2 (4 users) ended: its "
        f"users stopped with it, so the steps from there measured less load than asked ({LOST_WORKER_FIX})")
    line = verdict_line(summary(lost))
    assert f"\nINCONCLUSIVE: {verdict['reason']}" in line


def test_a_missing_worker_counts_from_its_last_heartbeat_and_a_quit_from_its_quit():
    # marked missing 22 s in: silent since ~18 s, inside step 1 (ends 20 s in)
    reason = summary([{"id": "w", "reason": "missing", "after_s": 20.0 + MISSING_SILENT_S - 2}])["verdict"]["reason"]
    assert "before step 1 (2 users) ended" in reason
    quit_reason = summary([{"id": "w", "reason": "quit", "after_s": 22.0}])["verdict"]["reason"]
    assert "(w quit 22.0 s into the test) before step 2 (4 users) ended" in quit_reason


def test_a_loss_after_the_last_judged_step_leaves_the_verdict_standing():
    after_the_end = [{"id": "w", "reason": "quit", "after_s": 41.0}]
    assert summary(after_the_end)["verdict"] == {"status": VERDICT_OK, "reason": None}
    steps = [Step.make(users=2, end="1970-01-01T00:16:50.000Z", rps=1.0),
             Step.make(users=4, end="1970-01-01T00:17:10.000Z", rps=1.0, judged=False)]  # 1010 and 1030
    workers = Workers.make(expected=2, connected=2, at_end=1, lost=[{"id": "w", "reason": "quit", "after_s": 15.0}])
    ok = Verdict.make(status=VERDICT_OK, reason=None)
    assert lost_worker_verdict(ok, steps, workers, T0) == ok  # lost during a step that decides nothing
    assert lost_worker_verdict(ok, steps, Workers.make(expected=2, lost=[]), T0) == ok


def test_an_inconclusive_verdict_keeps_its_reason_after_the_loss():
    bound = summary([{"id": "w", "reason": "quit", "after_s": 30.0}], two_steps(cpu=95.0))["verdict"]
    assert bound["status"] == VERDICT_INCONCLUSIVE
    first, rest = bound["reason"].split("; ", 1)
    assert first.startswith("1 of 2 Locust workers lost (w quit 30.0 s into the test) before step 2")
    assert rest.startswith("step 1 (2 users) was client-bound")


def test_a_worker_id_is_sanitised_in_the_reason():
    reason = summary([{"id": "w\x1b[31mred", "reason": "quit", "after_s": 30.0}])["verdict"]["reason"]
    assert "\x1b" not in reason
