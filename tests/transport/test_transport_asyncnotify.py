"""Waiting for an async result through its SNS notification read from SQS: the notification's format
both ways, the listener's hand-over (early, late, stale, foreign, garbage), the waiter's verdicts."""

from __future__ import annotations

import orjson
import pytest

from sm_locust.aws.async_notification import COMPLETED, FAILED, AsyncNotification, epoch, iso, parse
from sm_locust.plateau.asyncresults import RESULT
from sm_locust.transport.asyncnotify import NotificationListener, NotificationWaiter
from sm_locust.transport.asyncwait import AsyncLedger
from sm_locust.transport.contract import AsyncResult

# A success notification as SageMaker documents it (docs/facts.md), and a failure.
SUCCESS = {
    "awsRegion": "us-east-1", "eventTime": "2022-01-25T22:46:00.608Z", "receivedTime": "2022-01-25T22:46:00.455Z",
    "invocationStatus": "Completed",
    "requestParameters": {"contentType": "text/csv", "endpointName": "ep", "inputLocation": "s3://b/in.csv"},
    "responseParameters": {"contentType": "text/csv; charset=utf-8", "outputLocation": "s3://b/out/x.out"},
    "inferenceId": "id-1", "eventVersion": "1.0", "eventSource": "aws:sagemaker", "eventName": "InferenceResult",
}
FAILURE = {
    "awsRegion": "us-east-1", "eventTime": "2022-01-25T22:46:01.000Z", "receivedTime": "2022-01-25T22:46:00.455Z",
    "invocationStatus": "Failed", "failureReason": "ClientError: Received server error (500) from model.",
    "requestParameters": {"endpointName": "ep", "inputLocation": "s3://b/in.csv"},
    "inferenceId": "id-2", "eventVersion": "1.0", "eventSource": "aws:sagemaker", "eventName": "InferenceResult",
}


def envelope(message: dict) -> str:
    """SNS's envelope around a message, as an SQS subscription without raw delivery receives it."""
    return orjson.dumps({"Type": "Notification", "MessageId": "m", "TopicArn": "arn:aws:sns:us-east-1:1:t",
                         "Message": orjson.dumps(message).decode(), "Timestamp": "2022-01-25T22:46:00.700Z"}).decode()


def test_parse_reads_the_documented_keys_in_an_envelope_or_raw():
    for body in (envelope(SUCCESS), orjson.dumps(SUCCESS).decode()):
        note = parse(body)
        assert note is not None and note.succeeded
        assert (note.inference_id, note.output_location, note.endpoint_name, note.input_location) == (
            "id-1", "s3://b/out/x.out", "ep", "s3://b/in.csv")
        assert note.received_time is not None and note.event_time is not None
        assert round((note.event_time - note.received_time) * 1000) == 153
    failed = parse(envelope(FAILURE))
    assert failed is not None and not failed.succeeded and failed.status == FAILED
    assert failed.failure_reason == "ClientError: Received server error (500) from model."


@pytest.mark.parametrize("body", [None, "", "not json", "[1]", orjson.dumps({"Type": "Notification",
                                  "Message": "x"}).decode(), orjson.dumps({**SUCCESS, "eventName": "Other"}).decode(),
                                  orjson.dumps({k: v for k, v in SUCCESS.items() if k != "inferenceId"}).decode(),
                                  "x" * 300_000])
def test_parse_ignores_what_is_not_a_notification(body):
    assert parse(body) is None


def test_a_notification_round_trips_through_its_json():
    note = AsyncNotification("id-9", COMPLETED, event_time=1_700_000_000.25, received_time=1_700_000_000.0,
                             output_location="s3://b/o/id-9.out", endpoint_name="ep", input_location="s3://b/i",
                             content_type="application/json", output_content_type="application/json")
    assert parse(envelope(orjson.loads(note.to_json()))) == note
    failed = AsyncNotification("id-8", FAILED, event_time=1.5, failure_reason="NoSuchKey: gone")
    message = orjson.loads(failed.to_json())
    assert "responseParameters" not in message and message["failureReason"] == "NoSuchKey: gone"
    assert parse(orjson.dumps(message)) == failed
    assert iso(1.5) == "1970-01-01T00:00:01.500Z" and epoch(iso(1.5)) == 1.5
    assert epoch("yesterday") is None and epoch(3) is None


class FakeSQS:
    """Batches of bodies handed out in order; deletions and releases recorded."""

    def __init__(self, batches: list[list[tuple[str, float]]]):
        self.batches = batches
        self.deleted: list[str] = []
        self.released: list[str] = []
        self.received = 0

    def receive_message(self, **kw):
        assert kw["WaitTimeSeconds"] >= 1 and kw["MaxNumberOfMessages"] == 10
        batch = self.batches.pop(0) if self.batches else []
        self.received += 1
        return {"Messages": [{"Body": body, "ReceiptHandle": f"h{self.received}-{i}",
                              "Attributes": {"SentTimestamp": str(int(sent * 1000))}}
                             for i, (body, sent) in enumerate(batch)]}

    def delete_message_batch(self, QueueUrl, Entries):
        self.deleted += [e["ReceiptHandle"] for e in Entries]

    def change_message_visibility_batch(self, QueueUrl, Entries):
        assert all(e["VisibilityTimeout"] == 0 for e in Entries)
        self.released += [e["ReceiptHandle"] for e in Entries]


def _listener(sqs) -> NotificationListener:
    clock = iter(range(10, 1000))
    listener = NotificationListener(sqs, "https://q", clock=lambda: float(next(clock)), wall=lambda: 1000.0)
    listener._thread = object()  # type: ignore[assignment]  # driven by receive_once here, no thread
    return listener


def test_the_listener_hands_each_notification_to_its_call_and_sorts_the_rest():
    early = dict(SUCCESS, inferenceId="early")
    sqs = FakeSQS([
        [(envelope(SUCCESS), 1000.0), (envelope(early), 1000.0), (envelope(dict(SUCCESS, inferenceId="old")), 900.0),
         ("garbage", 1000.0)],
        [(envelope(SUCCESS), 1000.0)],  # a second copy of a notification already handed over
    ])
    listener = _listener(sqs)
    slot = listener.expect("id-1")
    assert not slot.event.is_set()
    assert listener.receive_once() == 4
    assert slot.event.is_set() and slot.notification is not None and slot.notification.inference_id == "id-1"
    assert (listener.stale, listener.ignored) == (1, 1)
    assert sqs.deleted == ["h1-0", "h1-2", "h1-3"] and sqs.released == ["h1-1"]  # early: kept and released
    claimed = listener.expect("early")  # its call asks after the notification came
    assert claimed.event.is_set() and claimed.notification is not None and claimed.received == slot.received
    listener.receive_once()
    assert sqs.deleted[-1] == "h2-0"  # the duplicate is deleted, not kept


def test_a_queue_that_cannot_be_read_fails_the_calls_waiting():
    listener = _listener(FakeSQS([]))
    slots = [listener.expect(f"id-{i}") for i in range(3)]
    listener.fail_waiting("ReceiveMessage AWS.SimpleQueueService.NonExistentQueue: no queue")
    assert all(s.event.is_set() and s.error and "NonExistentQueue" in s.error for s in slots)


def _wait(listener, inference_id, timeout_s=5.0):
    ledger = AsyncLedger()
    clock = [100.0]
    waiter = NotificationWaiter(listener, timeout_s, ledger, clock=lambda: clock[0])
    failure = waiter.wait(AsyncResult(inference_id, "s3://b/o", "s3://b/f"), started=99.5, start_time=5000.0)
    return failure, ledger


def test_the_waiter_names_failures_and_records_each_call():
    listener = _listener(FakeSQS([]))
    listener.deliver([{"Body": envelope(SUCCESS)}, {"Body": envelope(FAILURE)}], received=99.8,
                     received_wall=1_643_150_760.708)
    ok, ledger = _wait(listener, "id-1")
    assert ok is None
    [call] = ledger.calls
    assert call.outcome == RESULT and call.polls == 0
    assert call.seen_s == pytest.approx(5000.5)  # received before the 202 was read: counted from the 202
    assert call.resolution_ms == pytest.approx(300.0)  # eventTime 22:46:00.608 -> received 00.708, woken 0.2 s on
    failed, ledger = _wait(listener, "id-2")
    assert str(failed) == "AsyncFailure: ClientError: Received server error (500) from model."
    assert ledger.calls[0].outcome == str(failed)
    missing, ledger = _wait(listener, None)
    assert str(missing).startswith("AsyncNoInferenceId") and ledger.calls[0].seen_s is not None


def test_the_waiter_times_out_named_and_a_queue_error_is_a_poll_error():
    listener = _listener(FakeSQS([]))
    late, ledger = _wait(listener, "never", timeout_s=0.01)
    assert str(late) == "AsyncTimeout: no notification within 0.01 s" and len(ledger.calls) == 1
    listener.fail_waiting("ReceiveMessage AccessDenied: no")
    assert listener.error == "ReceiveMessage AccessDenied: no"
