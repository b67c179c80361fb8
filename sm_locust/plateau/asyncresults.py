"""Asynchronous inference from the client's side, pure: when each call's result was seen, and what
that says (docs/async.md).

A call is accepted (202) and its result appears later in S3; the client polls on a `PollSchedule`,
so a measured time to result is late by at most the poll's **resolution** (`AsyncCall.resolution_ms`).
From the calls this gives time-to-result histograms per second (for `measure.uncertainty`), the
resolution, and the **backlog**: calls accepted whose result has not been seen, per second.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from sm_locust.plateau.synthetic import locust_bucket

RESULT = "result"
"""An `AsyncCall.outcome` for a result found at the OutputLocation; anything else names a failure."""

DEFAULT_FIRST_POLL_MS = 100.0
DEFAULT_POLL_FACTOR = 2.0
DEFAULT_MAX_POLL_MS = 5000.0


@dataclass(frozen=True)
class PollSchedule:
    """When the client looks for a result: `first_ms` after the acceptance, then every delay
    `factor` times the one before, never more than `max_ms` (back-off bounds the polls' cost; the
    ceiling bounds the resolution)."""

    first_ms: float = DEFAULT_FIRST_POLL_MS
    factor: float = DEFAULT_POLL_FACTOR
    max_ms: float = DEFAULT_MAX_POLL_MS

    def __post_init__(self) -> None:
        if not (self.first_ms > 0 and self.factor >= 1 and self.max_ms >= self.first_ms):
            raise ValueError(f"poll schedule needs first_ms > 0, factor >= 1, max_ms >= first_ms: {self}")

    def delay_ms(self, n: int) -> float:
        """The wait before poll `n` (0 = the first poll)."""
        return min(self.max_ms, self.first_ms * self.factor ** min(n, 64))

    def delays(self, timeout_ms: float) -> Iterator[float]:
        """The waits before each poll while their sum stays within `timeout_ms`; one last poll at
        the timeout itself when the schedule does not land on it."""
        elapsed, n = 0.0, 0
        while True:
            delay = self.delay_ms(n)
            if elapsed + delay >= timeout_ms:
                if timeout_ms > elapsed:
                    yield timeout_ms - elapsed
                return
            yield delay
            elapsed += delay
            n += 1

    def resolution_ms(self, polls: int) -> float:
        """How late a result found at poll number `polls` (1 = the first) can be seen: the delay
        before that poll (the object appeared some time after the poll before it)."""
        return self.delay_ms(max(0, polls - 1))


@dataclass(frozen=True, slots=True)
class AsyncCall:
    """One InvokeEndpointAsync call, in run seconds: `sent_s` (call start), `accepted_s` (the 202),
    `seen_s` (the poll that found its result or failure object; None while still awaited),
    `outcome` (`RESULT`, else the failure's name), `polls` (HeadObject calls made), `resolution_ms`
    (the window the object appeared in unseen: from the last poll that missed it, or the acceptance,
    to the answer of the one that found it)."""

    sent_s: float
    accepted_s: float
    seen_s: float | None = None
    outcome: str | None = None
    polls: int = 0
    resolution_ms: float | None = None

    @property
    def acceptance_ms(self) -> float:
        return (self.accepted_s - self.sent_s) * 1000.0

    @property
    def time_to_result_ms(self) -> float | None:
        """Call start to the result seen; None for a call still awaited or one that failed."""
        if self.seen_s is None or self.outcome != RESULT:
            return None
        return (self.seen_s - self.sent_s) * 1000.0

    def as_tuple(self) -> tuple:
        """A plain tuple (what a worker ships to the master)."""
        return (self.sent_s, self.accepted_s, self.seen_s, self.outcome, self.polls, self.resolution_ms)

    @classmethod
    def from_tuple(cls, values: Sequence) -> AsyncCall:
        sent, accepted, seen, outcome, polls, resolution = values
        return cls(float(sent), float(accepted), None if seen is None else float(seen),
                   None if outcome is None else str(outcome), int(polls),
                   None if resolution is None else float(resolution))


def result_histograms(calls: Sequence[AsyncCall], start_s: float = 0.0) -> list[dict[int, int]]:
    """Per second of the run (from `start_s`, by the second each result was seen), the time to
    result in Locust's buckets: the samples `measure.uncertainty.percentile_cis` takes. Seconds
    without a result are empty histograms, so the blocks are cut by time."""
    seen = [(c.seen_s, c.time_to_result_ms) for c in calls if c.time_to_result_ms is not None]
    if not seen:
        return []
    last = int(max(s for s, _ in seen if s is not None) - start_s)
    hists: list[dict[int, int]] = [{} for _ in range(max(0, last) + 1)]
    for seen_s, ms in seen:
        index = max(0, int((seen_s or 0.0) - start_s))
        bucket = locust_bucket(ms or 0.0)
        hists[index][bucket] = hists[index].get(bucket, 0) + 1
    return hists


def backlog_series(calls: Sequence[AsyncCall], start_s: float, end_s: float) -> list[int]:
    """The client-side backlog at the end of each whole second from `start_s` to `end_s` (sample
    `i` at `start_s + i + 1`): calls accepted by then whose result (or failure) was not seen by then."""
    seconds = max(0, int(end_s - start_s))
    deltas = [0] * (seconds + 1)
    for call in calls:
        opened = int(call.accepted_s - start_s)
        if opened >= seconds:
            continue
        deltas[max(0, opened)] += 1
        if call.seen_s is not None:
            closed = int(call.seen_s - start_s)
            if closed < seconds:
                deltas[max(0, closed)] -= 1
    out, level = [], 0
    for i in range(seconds):
        level += deltas[i]
        out.append(level)
    return out


def awaited_at(calls: Sequence[AsyncCall], at_s: float) -> int:
    """The calls of a run that ended at `at_s` with no result or failure seen by then (the stop's
    backlog), so accepted = results + failures + awaited. That includes the calls sent after `at_s`:
    the run's end is stamped when its stop begins, a user mid-task (or a worker process the stop has
    not reached yet) still sends, and the endpoint answers those calls all the same."""
    return sum(1 for c in calls if c.seen_s is None or c.seen_s > at_s)
