"""A distributed run that lost Locust workers says so: the closing line names them, and a run that sent
nothing because every worker was lost says that, not "check --users" (core/verdict.py)."""

from __future__ import annotations

from sm_locust.core.verdict import lost_workers, nothing_completed, verdict_line
from sm_locust.record.model import Summary


def _summary(requests: int, at_end: int, lost: list[tuple[str, float]], expected: int = 2) -> dict:
    return {"schema": 1, "totals": {"requests": requests, "failures": 0, "rps": requests / 8},
            "steps": [], "workers": {"expected": expected, "connected": expected, "at_end": at_end,
                                     "lost": [{"id": f"w{i}", "reason": reason, "after_s": after}
                                              for i, (reason, after) in enumerate(lost)]}}


def test_the_workers_record_is_typed():
    workers = Summary.of(_summary(0, 0, [("missing", 4.1)])).workers
    assert workers is not None and (workers.expected, workers.at_end) == (2, 0)
    assert [(w.reason, w.after_s) for w in workers.lost] == [("missing", 4.1)]


def test_the_closing_line_names_the_workers_lost():
    both = _summary(0, 0, [("missing", 4.1), ("missing", 4.2)])
    assert lost_workers(both) == "2 of 2 Locust workers lost (missing 4.1 s, missing 4.2 s into the test)"
    assert verdict_line(both).splitlines()[0].endswith(
        "0 failures; 2 of 2 Locust workers lost (missing 4.1 s, missing 4.2 s into the test)")
    one = _summary(40, 1, [("quit", 6.0)])
    assert verdict_line(one).splitlines()[0].endswith("; 1 of 2 Locust workers lost (quit 6.0 s into the test)")
    kept = _summary(40, 2, [])
    assert lost_workers(kept) is None and "lost" not in verdict_line(kept)
    assert lost_workers({"schema": 1, "totals": {"requests": 1}}) is None  # not distributed


def test_nothing_completed_because_every_worker_was_lost_says_so():
    reason = nothing_completed(_summary(0, 0, [("missing", 4.1), ("missing", 4.2)]))
    assert reason is not None and reason.startswith(
        "no request completed: 2 of 2 Locust workers lost (missing 4.1 s, missing 4.2 s into the test), and "
        "Locust stops a test without workers")
    assert "check --users" not in reason
    # one worker left that sent nothing: the loss is not why nothing completed
    assert nothing_completed(_summary(0, 1, [("missing", 4.1)])) == (
        "no request completed: nothing was sent (check --users, the shape and --run-time)")
    assert nothing_completed(_summary(5, 0, [("missing", 4.1), ("missing", 4.2)])) is None

