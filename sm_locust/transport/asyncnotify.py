"""Waiting for an asynchronous inference's result through its notification (`--async-result
sqs:QUEUE_URL`; docs/async.md): the endpoint's SNS success and error topics are subscribed to an SQS
queue, and each call waits for the notification that names its InferenceId. Nothing is polled in S3.

`NotificationListener` (one per process and queue) long-polls the queue and hands each notification
(`aws.async_notification.parse`: SNS envelope or raw delivery) to the call waiting for it, stamped
with when it was received. `NotificationWaiter.wait` has `ResultWaiter.wait`'s contract: the call's
failure or None; a `Failed` notification is `AsyncFailure` named by its failureReason, none within
`--async-timeout` is `AsyncTimeout`, a queue that cannot be read is `AsyncPollError`. The call goes
into the same `AsyncLedger` with `polls` 0 and, as its resolution, the notification's delivery (its
eventTime -> the call woken here: how late the client learned of the result; 0 when the clocks
disagree). A notification read before the 202 counts from the 202's reading.

The queue is the test's: the listener deletes the notifications it hands over, those of calls that
are over, and any from before it started. A notification for no call of this process (one sent
before the 202 was read, or a call of another Locust worker) is kept here for a call that asks later
and made visible again on the queue for the other processes.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sm_locust.aws.async_notification import AsyncNotification, parse
from sm_locust.aws.clients import AwsClient
from sm_locust.invocation import InvocationError
from sm_locust.plateau.asyncresults import RESULT, AsyncCall
from sm_locust.transport.asyncwait import ASYNC_FAILURE, ASYNC_POLL_ERROR, ASYNC_TIMEOUT, AsyncLedger

ASYNC_NO_INFERENCE_ID = "AsyncNoInferenceId"
RECEIVE_WAIT_S = 1
"""ReceiveMessage's long poll: an answer as soon as a message is there, an empty one after 1 s."""
MAX_KEPT = 10_000
"""Notifications kept for a later call, and finished InferenceIds remembered (oldest forgotten first)."""
STALE_SLACK_S = 2.0
"""A notification sent this long before the listener started is from an earlier run (clock slack)."""
ERROR_BACKOFF_S = 1.0


def _error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str((response.get("Error") or {}).get("Code") or type(exc).__name__)
    return type(exc).__name__


@dataclass
class Slot:
    """One call's wait: set once its notification (or the queue's error) is there."""

    event: threading.Event = field(default_factory=threading.Event)
    notification: AsyncNotification | None = None
    received: float | None = None  # the listener's clock when the message arrived
    received_wall: float | None = None  # and the wall clock (for the delivery's lateness)
    error: str | None = None


class NotificationListener:
    """Reads one queue for the calls of this process (module doc). `sqs` is a boto3 SQS client."""

    def __init__(self, sqs: AwsClient, queue_url: str, clock: Callable[[], float] = time.perf_counter,
                 wall: Callable[[], float] = time.time):
        self.sqs = sqs
        self.queue_url = queue_url
        self.clock = clock
        self.wall = wall
        self.started_wall = wall()
        self._waiting: dict[str, Slot] = {}
        self._kept: OrderedDict[str, tuple[AsyncNotification, float, float]] = OrderedDict()
        self._done: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.receives = 0
        self.stale = 0
        self.ignored = 0
        self.error: str | None = None

    def expect(self, inference_id: str) -> Slot:
        """The slot the call for `inference_id` waits on (filled at once if its notification came first)."""
        slot = Slot()
        with self._lock:
            kept = self._kept.pop(inference_id, None)
            if kept is not None:
                slot.notification, slot.received, slot.received_wall = kept
                slot.event.set()
            else:
                self._waiting[inference_id] = slot
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="sm-locust-async-notifications", daemon=True)
                self._thread.start()
        return slot

    def forget(self, inference_id: str) -> None:
        """The call is over (result, failure, timeout or stop): a later copy of its notification is deleted."""
        with self._lock:
            self._waiting.pop(inference_id, None)
            self._remember(self._done, inference_id, None)

    @staticmethod
    def _remember(store: OrderedDict, key: str, value: object) -> None:
        store[key] = value
        store.move_to_end(key)
        while len(store) > MAX_KEPT:
            store.popitem(last=False)

    def deliver(self, messages: list[dict], received: float, received_wall: float) -> tuple[list[dict], list[dict]]:
        """Hand `messages` (ReceiveMessage's) to their calls: (the messages to delete, those to make
        visible again for another process)."""
        delete, release = [], []
        with self._lock:
            for message in messages:
                note = parse(message.get("Body"))
                if note is None:
                    self.ignored += 1
                    delete.append(message)
                    continue
                slot = self._waiting.pop(note.inference_id, None)
                if slot is not None:
                    slot.notification, slot.received, slot.received_wall = note, received, received_wall
                    self._remember(self._done, note.inference_id, None)
                    slot.event.set()
                    delete.append(message)
                elif note.inference_id in self._done:
                    delete.append(message)
                elif self._sent(message) < self.started_wall - STALE_SLACK_S:
                    self.stale += 1
                    delete.append(message)
                else:
                    self._remember(self._kept, note.inference_id, (note, received, received_wall))
                    release.append(message)
        return delete, release

    @staticmethod
    def _sent(message: dict) -> float:
        """SQS's SentTimestamp (ms) in seconds; +inf when absent (never taken for stale)."""
        try:
            return float((message.get("Attributes") or {})["SentTimestamp"]) / 1000.0
        except (KeyError, TypeError, ValueError):
            return float("inf")

    def receive_once(self) -> int:
        """One ReceiveMessage (long poll), delivered, deleted and released; the messages read."""
        answer = self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10,
                                          WaitTimeSeconds=RECEIVE_WAIT_S, AttributeNames=["SentTimestamp"])
        received, received_wall = self.clock(), self.wall()
        self.receives += 1
        messages = answer.get("Messages") or []
        delete, release = self.deliver(messages, received, received_wall)
        if delete:
            self.sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(delete)])
        if release:
            self.sqs.change_message_visibility_batch(QueueUrl=self.queue_url, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                for i, m in enumerate(release)])
        return len(messages)

    def fail_waiting(self, error: str) -> None:
        """The queue cannot be read: every call waiting now fails with `error`."""
        with self._lock:
            self.error = error
            waiting, self._waiting = self._waiting, {}
        for slot in waiting.values():
            slot.error = error
            slot.event.set()

    def _run(self) -> None:
        while True:
            try:
                self.receive_once()
                self.error = None
            except Exception as exc:  # the calls waiting fail, named; the loop goes on after a pause
                self.fail_waiting(f"ReceiveMessage {_error_code(exc)}: {exc}")
                time.sleep(ERROR_BACKOFF_S)


_LISTENERS: dict[str, NotificationListener] = {}
_LISTENERS_LOCK = threading.Lock()


def listener_for(queue_url: str, make_sqs: Callable[[], AwsClient]) -> NotificationListener:
    """The process's listener on `queue_url` (one per queue, so that no two compete for its messages)."""
    with _LISTENERS_LOCK:
        listener = _LISTENERS.get(queue_url)
        if listener is None:
            listener = _LISTENERS[queue_url] = NotificationListener(make_sqs(), queue_url)
        return listener


class NotificationWaiter:
    """Waits for one accepted call's notification (module doc)."""

    def __init__(self, listener: NotificationListener, timeout_s: float, ledger: AsyncLedger,
                 clock: Callable[[], float] = time.perf_counter):
        self.listener = listener
        self.timeout_s = timeout_s
        self.ledger = ledger
        self.fetcher: Any = None  # --async-fetch: transport.asyncwait.OutputFetcher
        self.clock = clock

    def wait(self, result: Any, started: float, start_time: float, measurement: Any = None,
             check: Callable[[bytes, str | None], InvocationError | None] | None = None) -> InvocationError | None:
        """Wait for `result`'s (an `AsyncResult`) notification; `started` the call's perf_counter
        start, `start_time` its wall-clock start. The failure, or None for a `Completed` one."""
        accepted = self.clock()
        self.ledger.open(start_time + (accepted - started))
        seen: float | None = None
        outcome: str | None = None
        delivery_ms: float | None = None
        error: InvocationError | None = None

        def epoch(t: float) -> float:
            return start_time + (t - started)

        inference_id = getattr(result, "inference_id", None)
        try:
            if not inference_id:
                error = InvocationError(ASYNC_NO_INFERENCE_ID, "InvokeEndpointAsync answered without an InferenceId")
                seen = self.clock()
                outcome = str(error)
                return error
            slot = self.listener.expect(inference_id)
            if not slot.event.wait(max(0.0, self.timeout_s - (self.clock() - accepted))):
                error = InvocationError(ASYNC_TIMEOUT, f"no notification within {self.timeout_s:g} s")
                seen = self.clock()
            elif slot.error is not None:
                error = InvocationError(ASYNC_POLL_ERROR, slot.error)
                seen = self.clock()
            else:
                note = slot.notification
                seen = self.clock()  # the call has its result now (what its entry times, too)
                if note is not None and note.event_time is not None and slot.received_wall is not None:
                    woke_wall = slot.received_wall + (seen - (slot.received if slot.received is not None else seen))
                    delivery_ms = max(0.0, (woke_wall - note.event_time) * 1000.0)
                if note is None or not note.succeeded:
                    reason = (note.failure_reason if note is not None else None) or (
                        f"invocationStatus {note.status}" if note is not None else "no notification")
                    error = InvocationError(ASYNC_FAILURE, reason)
            if error is None and self.fetcher is not None:  # --async-fetch: after the time to result
                error = self.fetcher.checked(result, check)
            outcome = RESULT if error is None else str(error)
            return error
        finally:  # also when a stop cuts the wait short: then the call is still awaited
            if outcome is None:  # cut short after the result was seen, while --async-fetch read it: awaited
                seen = None
            if inference_id:
                self.listener.forget(inference_id)
            self.ledger.add(AsyncCall(start_time, epoch(accepted), None if seen is None else epoch(seen),
                                      outcome, 0, delivery_ms))
            if measurement is not None and seen is not None:  # its entry times call start -> result seen
                measurement.end = seen
