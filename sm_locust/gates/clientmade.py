"""Whether a run's figures are the load generator's, and which steps made them: the one rule the run's
closing checks (`core/checks.py`) and the gates (`gates.evaluate`) read.

A step is client-bound when the load generator, not the endpoint, held it back (summary.json's
`steps[].client_bound` and `client_bound_reason`, `measure.steady`): its latency and throughput are
partly the client's. Two windows read that:

- the run's answer (`client_made`): the run's verdict is INCONCLUSIVE and its reason names a
  client-bound step's own reason (a search that stopped on one, its capacity or knee step measured
  client-bound, any step of a constant load), or a Locust worker lost before a step it rests on ended
  (the steps from there measured less load than asked). An answer left undecided at the step budget is not:
  its figures are the endpoint's, each judged on its own interval;
- a figure pooled over the whole run (`in_whole_run`: summary.json's totals, a request name's
  figures): every step's requests are in it, so one client-bound step makes it partly the client's,
  whatever the verdict (a search's step measured again, a step the answer does not rest on).

Either says which steps, why and the fix (`measure.looplag`: raise the pod's CPU limit when its
cgroup throttled the generator, else add workers). Pure: summary.json's typed record in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sm_locust.measure.looplag import BOTTLENECK, FIX_CPU_LIMIT, FIX_WORKERS, LoopLag, generator_fix, quotes_reason
from sm_locust.record.model import JsonObject, Step, Summary
from sm_locust.record.summary import LOST_WORKER_FIX, steps_after_loss

SHOWN_STEPS = 3  # steps named in a gate's line; more are counted
WORKER_LOST = "a Locust worker was lost"


@dataclass(frozen=True)
class ClientMade:
    """Figures the load generator made: the client-bound steps (indexes into summary.json's `steps`),
    why (the run verdict's reason, or the first such step's), what to do, and whether the run's own
    verdict says so (False: a step the answer does not rest on, inside a whole-run figure)."""

    steps: tuple[int, ...]
    reason: str
    fix: str
    verdict: bool
    what: str = BOTTLENECK  # what happened to the load generator, for a gate's line

    def where(self, steps: Sequence[Step]) -> str:
        """'step 2 (8 users) of 3', 'steps 2, 4 (8 users, 16 users) of 5' (the first `SHOWN_STEPS`, then a count)."""
        if not self.steps:
            return "the run"
        shown = self.steps[:SHOWN_STEPS]
        loads = ", ".join(steps[i].load for i in shown if i < len(steps))
        numbers = ", ".join(str(i + 1) for i in shown)
        more = f" and {len(self.steps) - len(shown)} more" if len(self.steps) > len(shown) else ""
        word = "step" if len(self.steps) == 1 else "steps"
        return f"{word} {numbers}{more} ({loads}) of {len(steps)}"

    @property
    def text(self) -> str:
        """The whole reason, for a note line or a report's property."""
        return f"the run's verdict is INCONCLUSIVE: {self.reason}" if self.verdict else self.reason


def _bound(summary: Summary) -> list[int]:
    return [i for i, step in enumerate(summary.steps) if step.client_bound and step.client_bound_reason]


def _fix(summary: Summary, indexes: Sequence[int]) -> str:
    """The fix each step names (`looplag.generator_fix` on its loop lag), the pod's CPU limit first."""
    fixes = {generator_fix(LoopLag.from_json(summary.steps[i].loop_lag)) for i in indexes}
    return " and ".join(fix for fix in (FIX_CPU_LIMIT, FIX_WORKERS) if fix in fixes) or FIX_WORKERS


def _lost_worker(record: Summary, reason: str) -> ClientMade | None:
    """The verdict is INCONCLUSIVE because a Locust worker was lost before a step it rests on ended
    (`record.summary.lost_worker_verdict`): the steps from there measured less load than asked."""
    if record.workers is None or not record.workers.lost or f"({LOST_WORKER_FIX})" not in reason:
        return None
    started = datetime.fromisoformat(record.started_at).timestamp() if record.started_at else None
    after = steps_after_loss(record.steps, record.workers, started) if started is not None else []
    return ClientMade(tuple(after), reason, LOST_WORKER_FIX, verdict=True, what=WORKER_LOST)


def client_made(summary: Summary | JsonObject) -> ClientMade | None:
    """The run is INCONCLUSIVE because the load generator made the figures its answer rests on: its
    verdict's reason names client-bound steps' own reasons, or a Locust worker lost before a step it
    rests on ended (module docstring); those steps, else None."""
    record = Summary.of(summary)
    reason = (record.verdict.reason if record.verdict else None) or ""
    if not record.inconclusive:
        return None
    lost = _lost_worker(record, reason)
    if lost is not None:
        return lost
    named = [i for i in _bound(record) if quotes_reason(reason, str(record.steps[i].client_bound_reason))]
    if not named:
        return None
    return ClientMade(tuple(named), reason, _fix(record, named), verdict=True)


def in_whole_run(summary: Summary | JsonObject) -> ClientMade | None:
    """Why a figure over the whole run is partly the client's, or None: every client-bound step (it
    pooled their requests), with the run verdict's reason when the verdict says so, else the first
    such step's own."""
    record = Summary.of(summary)
    bound = _bound(record)
    made = client_made(record)
    if made is not None and made.fix == LOST_WORKER_FIX:
        return ClientMade(tuple(sorted(set(bound) | set(made.steps))), made.reason, made.fix, verdict=True,
                          what=made.what)
    if not bound:
        return None
    if made is not None:
        return ClientMade(tuple(bound), made.reason, _fix(record, bound), verdict=True)
    first = record.steps[bound[0]]
    reason = f"step {bound[0] + 1} ({first.load}) was client-bound: {first.client_bound_reason}"
    return ClientMade(tuple(bound), reason, _fix(record, bound), verdict=False)
