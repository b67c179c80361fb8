"""Waiting for an asynchronous inference's result (`--async-result s3`; docs/async.md).

After InvokeEndpointAsync's 202, the call polls S3 with HeadObject on the OutputLocation and then
the FailureLocation, on `plateau.asyncresults.PollSchedule` (first delay, back-off, ceiling), until
one exists or `--async-timeout` passes. `ResultWaiter.wait` returns the call's failure (None for a
result): a FailureLocation object is a failure named from its first bytes (`AsyncFailure: ...`,
sanitised and bounded by `InvocationError`), no object in time is `AsyncTimeout`, an S3 error other
than "not found" is `AsyncPollError`. Nothing is raised into a User: `SageMakerClient.invoke_async`
puts the failure on its one `InvokeEndpointAsync` event, whose response time is the time to result.

The resolution of a call's time to result is measured, not assumed: the object appeared after the
last HeadObject that missed it was sent (or the acceptance) and before the one that found it
answered; that window (the schedule's wait plus the HeadObjects' own time) is the call's
`resolution_ms`.

Every call goes into the process's `AsyncLedger` (sent, accepted, seen, outcome, HeadObject polls):
a call a stop cuts short is recorded as still awaited. The calls awaited now are counted by the second
of their acceptance (`awaited_by_second`: the async search's SLO counts those older than the SLO).
Workers ship their new calls and that count to the master (`util.shipped`), where summary.json's
`async` is built (record/asyncsummary.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sm_locust.aws.clients import AwsClient
from sm_locust.invocation import InvocationError
from sm_locust.plateau.asyncresults import RESULT, AsyncCall, PollSchedule
from sm_locust.util.shipped import WorkerShipped

ASYNC_FAILURE = "AsyncFailure"
ASYNC_TIMEOUT = "AsyncTimeout"
ASYNC_POLL_ERROR = "AsyncPollError"
ASYNC_NO_LOCATION = "AsyncNoOutputLocation"
ASYNC_FETCH_ERROR = "AsyncFetchError"
MAX_FETCH_BYTES = 64 * 1024 * 1024
"""The most of an output object `--async-fetch` reads (an async answer may be up to 1 GB: past this the
answer is checked on its first 64 MB, as a validator reading a synchronous answer would never see more)."""
FAILURE_READ_BYTES = 1024
"""How much of a FailureLocation object names the failure (InvocationError bounds it further)."""
MAX_CALLS = 200_000
"""Calls a process keeps for summary.json (about 25 MB; their figures take ~3 s at the end of the run);
past it calls are counted, not kept."""
NOT_FOUND = ("404", "NoSuchKey", "NotFound")


def split_s3_uri(uri: str) -> tuple[str, str]:
    """`s3://bucket/key` -> (bucket, key); ValueError for anything else."""
    if not uri.startswith("s3://") or "/" not in uri[5:]:
        raise ValueError(f"not an s3://bucket/key URI: {uri!r}")
    bucket, key = uri[5:].split("/", 1)
    if not bucket or not key:
        raise ValueError(f"not an s3://bucket/key URI: {uri!r}")
    return bucket, key


def _error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str((response.get("Error") or {}).get("Code") or "")
    return ""


class AsyncLedger(WorkerShipped):
    """The async calls of this process (plus, on a master, its workers')."""

    ATTRIBUTE = "sm_locust_async_ledger"
    REPORT_KEY = "sm_locust_async_calls"

    def __init__(self) -> None:
        self.calls: list[AsyncCall] = []
        self.dropped = 0
        self.opened = 0  # calls accepted so far (finished or not): the live backlog is opened - finished
        self.pending: dict[int, int] = {}  # calls awaited now, by epoch second of their acceptance
        self._remote_pending: dict[str, dict[int, int]] = {}  # on a master: each worker's, as last shipped
        self._shipped = 0
        self._shipped_dropped = 0
        self._shipped_opened = 0
        self.active = False  # a call was made (here, or on a worker that shipped it)
        self.wanted = False  # the run waits for async results (`--async-result`): `async` is written even with no call

    def open(self, accepted_s: float | None = None) -> None:
        """A call was accepted (at epoch `accepted_s`) and now waits for its result (counted in
        `backlog`, and in `pending` by its second, until it is added)."""
        self.active = True
        self.opened += 1
        if accepted_s is not None:
            second = int(accepted_s)
            self.pending[second] = self.pending.get(second, 0) + 1

    def awaited_by_second(self) -> dict[int, int]:
        """Calls awaited now by epoch second of acceptance (on a master: its workers' as last shipped)."""
        out = dict(self.pending)
        for remote in self._remote_pending.values():
            for second, n in remote.items():
                out[second] = out.get(second, 0) + n
        return out

    @property
    def backlog(self) -> int:
        """Calls accepted whose wait has not ended (on a master: as its workers last reported)."""
        return max(0, self.opened - len(self.calls) - self.dropped)

    def add(self, call: AsyncCall) -> None:
        self.active = True
        second = int(call.accepted_s)
        left = self.pending.get(second, 0) - 1
        if left > 0:
            self.pending[second] = left
        else:
            self.pending.pop(second, None)
        if len(self.calls) < MAX_CALLS:
            self.calls.append(call)
        else:
            self.dropped += 1

    def reset(self) -> None:
        self.calls, self.dropped, self._shipped, self._shipped_dropped = [], 0, 0, 0
        self.opened = self._shipped_opened = 0
        self.pending, self._remote_pending = {}, {}

    def take_delta(self) -> dict | None:
        if (self._shipped == len(self.calls) and self._shipped_dropped == self.dropped
                and self._shipped_opened == self.opened):
            return None
        delta = {"calls": [c.as_tuple() for c in self.calls[self._shipped:]],
                 "dropped": self.dropped - self._shipped_dropped, "opened": self.opened - self._shipped_opened,
                 "pending": [[second, n] for second, n in self.pending.items()]}
        self._shipped, self._shipped_dropped, self._shipped_opened = len(self.calls), self.dropped, self.opened
        return delta

    def merge_delta(self, delta: object, client_id: str) -> None:
        if not isinstance(delta, dict):
            return
        for values in delta.get("calls") or ():
            self.add(AsyncCall.from_tuple(values))
        self.dropped += int(delta.get("dropped") or 0)
        self.opened += int(delta.get("opened") or 0)
        if "pending" in delta:  # a snapshot: the worker's calls awaited when it shipped
            self._remote_pending[client_id] = {int(second): int(n) for second, n in delta.get("pending") or ()}
        self.active = True


class OutputFetcher:
    """`--async-fetch`: GetObject on a result's OutputLocation once it was seen, so it can be validated
    like a synchronous answer (`contract.check_response`). Its time is not the time to result's."""

    def __init__(self, s3: Any):
        self.s3 = s3

    def checked(self, result: Any, check: Callable[[bytes, str | None], InvocationError | None] | None
                ) -> InvocationError | None:
        """Fetch `result`'s output and give it to `check` (None: fetched, nothing to check): the failure, or None."""
        fetched = self.fetch(getattr(result, "output_location", "") or "")
        if isinstance(fetched, InvocationError):
            return fetched
        return check(*fetched) if check is not None else None

    def fetch(self, uri: str) -> tuple[bytes, str | None] | InvocationError:
        """(body, content type) of the object at `uri`, or the failure (`AsyncFetchError: ...`)."""
        try:
            bucket, key = split_s3_uri(uri)
            answer = self.s3.get_object(Bucket=bucket, Key=key)
            return answer["Body"].read(MAX_FETCH_BYTES), answer.get("ContentType")
        except Exception as exc:  # a missing or unreadable output: the call fails, named
            return InvocationError(ASYNC_FETCH_ERROR, f"GetObject {_error_code(exc) or type(exc).__name__}: {exc}")


class ResultWaiter:
    """Polls S3 for one accepted call's result (module doc). `s3` is a boto3 S3 client (from
    `aws.clients`), `sleep` the process's sleep (gevent's, patched, in a Locust process)."""

    def __init__(self, s3: AwsClient, schedule: PollSchedule, timeout_s: float, ledger: AsyncLedger,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.perf_counter):
        self.s3 = s3
        self.fetcher: OutputFetcher | None = None  # --async-fetch
        self.schedule = schedule
        self.timeout_s = timeout_s
        self.ledger = ledger
        self.sleep = sleep
        self.clock = clock

    def wait(self, result: Any, started: float, start_time: float, measurement: Any = None,
             check: Callable[[bytes, str | None], InvocationError | None] | None = None) -> InvocationError | None:
        """Poll for `result` (an `AsyncResult`) accepted now; `started` the call's perf_counter
        start, `start_time` its wall-clock start. The failure, or None once the output exists (with
        `--async-fetch`, once it was read and `check` passed it: after the time to result)."""
        accepted = self.clock()
        self.ledger.open(start_time + (accepted - started))
        polls, resolution, outcome, seen = 0, None, None, None
        error: InvocationError | None = None

        def epoch(t: float) -> float:
            return start_time + (t - started)

        try:
            output = getattr(result, "output_location", None)
            failure = getattr(result, "failure_location", None)
            if not output:
                error = InvocationError(ASYNC_NO_LOCATION, "InvokeEndpointAsync answered without an OutputLocation")
                outcome, seen = str(error), self.clock()
                return error
            missed = {output: accepted, failure: accepted}  # when each was last asked and not there
            for delay_ms in self.schedule.delays(self.timeout_s * 1000.0):
                self.sleep(delay_ms / 1000.0)
                asked = self.clock()
                found, polls = self._exists(output, polls)
                if found is True:
                    resolution = (self.clock() - missed[output]) * 1000.0
                    break
                if isinstance(found, InvocationError):
                    error = found
                    break
                missed[output] = asked
                if failure:
                    asked = self.clock()
                    failed, polls = self._exists(failure, polls)
                    if isinstance(failed, InvocationError):
                        error = failed
                        break
                    if failed:
                        resolution = (self.clock() - missed[failure]) * 1000.0
                        error = InvocationError(ASYNC_FAILURE, self._read(failure))
                        break
                    missed[failure] = asked
            else:
                error = InvocationError(ASYNC_TIMEOUT, f"no result within {self.timeout_s:g} s")
            seen = self.clock()
            if error is None and self.fetcher is not None:
                error = self.fetcher.checked(result, check)
            outcome = RESULT if error is None else str(error)
            return error
        finally:  # also when a stop cuts the wait short: then the call is still awaited
            if outcome is None:  # cut short after the result was seen, while --async-fetch read it: awaited
                seen = None
            self.ledger.add(AsyncCall(start_time, epoch(accepted), None if seen is None else epoch(seen),
                                      outcome, polls, resolution))
            if measurement is not None and seen is not None:  # its entry times call start -> result seen
                measurement.end = seen

    def _exists(self, uri: str, polls: int) -> tuple[bool | InvocationError, int]:
        """HeadObject on `uri`: True, False (not found), or the failure; the polls counted."""
        try:
            bucket, key = split_s3_uri(uri)
        except ValueError as exc:
            return InvocationError(ASYNC_POLL_ERROR, str(exc)), polls
        try:
            self.s3.head_object(Bucket=bucket, Key=key)
            return True, polls + 1
        except Exception as exc:  # botocore's ClientError; anything else is the poll's failure too
            code = _error_code(exc)
            if code in NOT_FOUND:
                return False, polls + 1
            return InvocationError(ASYNC_POLL_ERROR, f"HeadObject {code or type(exc).__name__}: {exc}"), polls + 1

    def _read(self, uri: str) -> str:
        """The first bytes of the failure object, as text (the failure's name); its error if unreadable."""
        bucket, key = split_s3_uri(uri)
        try:
            body = self.s3.get_object(Bucket=bucket, Key=key, Range=f"bytes=0-{FAILURE_READ_BYTES - 1}")["Body"]
            return body.read(FAILURE_READ_BYTES).decode("utf-8", "replace")
        except Exception as exc:  # the object exists but cannot be read: say so, still a failure
            return f"failure object unreadable ({_error_code(exc) or type(exc).__name__})"
