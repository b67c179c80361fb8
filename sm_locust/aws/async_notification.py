"""Asynchronous inference's SNS notification (AsyncInferenceConfig's SuccessTopic / ErrorTopic), both
ways: `serve --async` publishes it, `--async-result sqs:QUEUE_URL` reads it from a queue subscribed to
the topics (docs/async.md).

The message is a JSON object: `invocationStatus` (`Completed` or `Failed`), `inferenceId`,
`eventTime` / `receivedTime` (ISO 8601, UTC), `requestParameters` (`endpointName`, `inputLocation`,
`contentType`, `accept`), `responseParameters` (`contentType`, `outputLocation`) on a success,
`failureReason` on a failure, `eventVersion` "1.0", `eventSource` "aws:sagemaker", `eventName`
"InferenceResult" (docs/facts.md, "Asynchronous inference", with its sources: the AWS page that
describes the notifications was not readable in full where this was written, so the keys come from
public code that reads real notifications; a key missing from a real one reads as absent, never as
a crash). Through SQS the message arrives inside SNS's envelope (`"Type": "Notification"`,
`"Message"`: the JSON as a string), or bare with raw message delivery: `parse` takes either.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

import orjson

COMPLETED = "Completed"
FAILED = "Failed"
EVENT_NAME = "InferenceResult"
MAX_BODY = 262_144
"""SNS's largest message (256 KB): a longer body is not a notification and is not parsed."""


def iso(epoch_s: float) -> str:
    """Epoch seconds -> `2022-01-25T22:46:00.608Z` (the notification's timestamps)."""
    moment = _dt.datetime.fromtimestamp(epoch_s, _dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def epoch(text: object) -> float | None:
    """An ISO 8601 timestamp -> epoch seconds; None for anything else."""
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.UTC)
    return moment.timestamp()


@dataclass(frozen=True)
class AsyncNotification:
    """One notification: which request, how it ended, when (epoch seconds), where the answer is."""

    inference_id: str
    status: str
    event_time: float | None = None
    received_time: float | None = None
    failure_reason: str | None = None
    output_location: str | None = None
    endpoint_name: str | None = None
    input_location: str | None = None
    content_type: str | None = None
    output_content_type: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.status == COMPLETED

    def to_json(self, region: str = "us-east-1") -> bytes:
        """The message SageMaker publishes (module doc); what `serve --async` sends to SNS."""
        request = {key: value for key, value in (("contentType", self.content_type),
                                                 ("endpointName", self.endpoint_name),
                                                 ("inputLocation", self.input_location)) if value}
        message: dict[str, object] = {"awsRegion": region}
        if self.event_time is not None:
            message["eventTime"] = iso(self.event_time)
        if self.received_time is not None:
            message["receivedTime"] = iso(self.received_time)
        message["invocationStatus"] = self.status
        if not self.succeeded:
            message["failureReason"] = self.failure_reason or ""
        message["requestParameters"] = request
        if self.succeeded:
            message["responseParameters"] = {key: value for key, value in (
                ("contentType", self.output_content_type), ("outputLocation", self.output_location)) if value}
        message.update(inferenceId=self.inference_id, eventVersion="1.0", eventSource="aws:sagemaker",
                       eventName=EVENT_NAME)
        return orjson.dumps(message)


def _object(text: object) -> dict | None:
    if isinstance(text, (bytes, str)) and 0 < len(text) <= MAX_BODY:
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None
    return None


def parse(body: object) -> AsyncNotification | None:
    """An SQS message body -> the notification (SNS envelope or raw delivery), or None when the body is
    not an async inference notification (anything else on the queue is ignored, not an error)."""
    message = _object(body)
    if message is not None and message.get("Type") == "Notification" and "Message" in message:
        message = _object(message.get("Message"))
    if message is None or message.get("eventName", EVENT_NAME) != EVENT_NAME:
        return None
    inference_id, status = message.get("inferenceId"), message.get("invocationStatus")
    if not isinstance(inference_id, str) or not inference_id or not isinstance(status, str):
        return None
    request: dict = message.get("requestParameters") or {}
    response: dict = message.get("responseParameters") or {}
    if not isinstance(request, dict):
        request = {}
    if not isinstance(response, dict):
        response = {}
    reason = message.get("failureReason")

    def text(value: object) -> str | None:
        return value if isinstance(value, str) and value else None

    return AsyncNotification(
        inference_id=inference_id, status=status,
        event_time=epoch(message.get("eventTime")), received_time=epoch(message.get("receivedTime")),
        failure_reason=text(reason), output_location=text(response.get("outputLocation")),
        endpoint_name=text(request.get("endpointName")), input_location=text(request.get("inputLocation")),
        content_type=text(request.get("contentType")), output_content_type=text(response.get("contentType")))
