"""The local endpoint's asynchronous inference (`sm-locust serve --async`; docs/async.md).

As SageMaker does (docs/facts.md, "Asynchronous inference"): InvokeEndpointAsync is answered 202
at once with the InferenceId, `OutputLocation` (`<S3OutputPath>/<InferenceId>.out`) and
`FailureLocation` (`<S3FailurePath>/<InferenceId>-error.out`); the request waits in a queue in front
of `MaxConcurrentInvocationsPerInstance` workers. A worker reads the input object from S3, runs the
model (its service time, `--service-time-ms`, then the ranking model) and writes the answer to the
OutputLocation; an input that cannot be read (a missing object: `NoSuchKey`) or that the model
refuses becomes a failure document at the FailureLocation. Every object it writes carries the
endpoint's own time to result (acceptance -> written) as the S3 metadata `time-to-result-ms`, and
the server counters count what it wrote (`async_accepted`, `async_results`, `async_failures`), so a
test can hold the client's figures against the endpoint's own. With NotificationConfig's topics
(`--async-success-topic`, `--async-error-topic`) each answer, once written, is also published to SNS
as SageMaker's notification (aws/async_notification.py; counted `async_notifications`, a refused
publish `async_notification_errors`: the answer is in S3 all the same). For the async CloudWatch
metrics (endpoint/metrics.py) it keeps each request's time in the backlog and total processing time
(windowed counters) and when the oldest request still queued was accepted (a gauge).

With `--async-max-instances` the queue is served by instances that autoscale on the backlog
(endpoint/asyncscaling.py): each has its own workers, which take requests only while it serves.

The queue lives in the worker process (one: `--async` refuses `--workers` > 1); its S3 client comes
from the AWS client factory, pointed at `--async-s3-url` (a moto server) when given.
"""

from __future__ import annotations

import queue
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

import orjson

from sm_locust.aws.async_notification import COMPLETED, FAILED, AsyncNotification
from sm_locust.aws.clients import Purpose
from sm_locust.aws.clients import client as aws_client
from sm_locust.endpoint import codecs
from sm_locust.endpoint.asyncscaling import POLL_S, AsyncCapacity, AsyncScalingConfig

TOPIC_ARN = re.compile(r"arn:aws[a-z\-]*:sns:[a-z0-9\-]*:[0-9]{12}:[a-zA-Z0-9_.-]+")
"""AsyncInferenceNotificationConfig's topic pattern (docs/facts.md)."""
MAX_CONCURRENT = 1000  # queue workers; the serve flag takes its bound from endpoint/options.py MAX_ASYNC_CONCURRENT
TIME_TO_RESULT_KEY = "time-to-result-ms"


def split_s3_uri(uri: str, what: str) -> tuple[str, str]:
    """`s3://bucket[/prefix]` -> (bucket, prefix without its trailing slash); ValueError naming `what`."""
    if not isinstance(uri, str) or not uri.startswith("s3://") or not uri[5:].split("/", 1)[0]:
        raise ValueError(f"{what} must be an s3://bucket/prefix URI, got {uri!r}")
    bucket, _, prefix = uri[5:].partition("/")
    return bucket, prefix.strip("/")


@dataclass(frozen=True)
class AsyncEndpointConfig:
    """AsyncInferenceConfig as the local endpoint emulates it: OutputConfig's S3OutputPath and
    S3FailurePath (default: the output path's `failures/`), NotificationConfig's SuccessTopic and
    ErrorTopic (SNS topic ARNs; none: no notification), ClientConfig's
    MaxConcurrentInvocationsPerInstance, and where S3 and SNS are (None: botocore's chain,
    AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL_SNS)."""

    output_path: str
    failure_path: str = ""
    max_concurrent: int = 1
    s3_url: str | None = None
    success_topic: str = ""
    error_topic: str = ""
    sns_url: str | None = None
    scaling: AsyncScalingConfig | None = None  # instances and their autoscaling (endpoint/asyncscaling.py)

    def validate(self) -> AsyncEndpointConfig:
        if self.scaling is not None:
            self.scaling.validate()
        split_s3_uri(self.output_path, "--async-output-path")
        if self.failure_path:
            split_s3_uri(self.failure_path, "--async-failure-path")
        if not 1 <= int(self.max_concurrent) <= MAX_CONCURRENT:
            raise ValueError(f"--async-max-concurrent must be 1-{MAX_CONCURRENT}, got {self.max_concurrent}")
        for flag, arn in (("--async-success-topic", self.success_topic), ("--async-error-topic", self.error_topic)):
            if arn and not TOPIC_ARN.fullmatch(arn):
                raise ValueError(f"{flag} must be an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME), got {arn!r}")
        return self

    def flags(self) -> list[str]:
        """The `sm-locust serve` flags that give this configuration (LocalEndpoint's command line)."""
        args = ["--async", "--async-output-path", self.output_path, "--async-max-concurrent", str(self.max_concurrent)]
        if self.failure_path:
            args += ["--async-failure-path", self.failure_path]
        if self.s3_url:
            args += ["--async-s3-url", self.s3_url]
        if self.success_topic:
            args += ["--async-success-topic", self.success_topic]
        if self.error_topic:
            args += ["--async-error-topic", self.error_topic]
        if self.sns_url:
            args += ["--async-sns-url", self.sns_url]
        if self.scaling is not None:
            args += self.scaling.flags()
        return args

    def output_location(self, inference_id: str) -> str:
        bucket, prefix = split_s3_uri(self.output_path, "--async-output-path")
        return f"s3://{bucket}/{prefix + '/' if prefix else ''}{inference_id}.out"

    def failure_location(self, inference_id: str) -> str:
        path = self.failure_path or self.output_path.rstrip("/") + "/failures"
        bucket, prefix = split_s3_uri(path, "--async-failure-path")
        return f"s3://{bucket}/{prefix + '/' if prefix else ''}{inference_id}-error.out"


@dataclass(frozen=True)
class Job:
    """One accepted request: where its input is and where its answer goes."""

    inference_id: str
    input_location: str
    output_location: str
    failure_location: str
    content_type: str | None
    accept: str | None
    attributes: str | None
    accepted: float  # time.monotonic() at the acceptance
    received_at: float = 0.0  # time.time() at the acceptance (the notification's receivedTime)
    endpoint_name: str = ""


def _error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str((response.get("Error") or {}).get("Code") or type(exc).__name__)
    return type(exc).__name__


class AsyncQueue:
    """The queue and its workers (started on the first request, after gunicorn forked)."""

    def __init__(self, config: AsyncEndpointConfig, app: Any, s3: Any = None, sns: Any = None):
        self.config = config
        self.app = app
        self._s3 = s3 if s3 is not None else self._client()  # now: boto3 takes ~1 s to load, not in a request
        self._sns = sns if sns is not None else (
            aws_client("sns", Purpose.CONTROL, endpoint_url=config.sns_url, default_region="us-east-1")
            if config.success_topic or config.error_topic else None)
        self._jobs: queue.Queue[Job] = queue.Queue()
        self._started = False
        self._lock = threading.Lock()
        self._outstanding = 0  # accepted, not yet answered: the backlog (ApproximateBacklogSize)
        self.capacity = (AsyncCapacity(config.scaling, lambda: self._outstanding, app.counters)
                         if config.scaling is not None else None)

    def _client(self) -> Any:
        return aws_client("s3", Purpose.CONTROL, endpoint_url=self.config.s3_url, default_region="us-east-1")

    @property
    def s3(self) -> Any:
        return self._s3

    def submit(self, job: Job) -> None:
        """Queue an accepted request (workers start with the first)."""
        with self._lock:
            if not self._started:
                self._started = True
                instances = self.config.scaling.max_instances if self.config.scaling is not None else 1
                for i in range(self.config.max_concurrent * instances):
                    threading.Thread(target=self._work, args=(i // self.config.max_concurrent,),
                                     name=f"async-worker-{i}", daemon=True).start()
                if self.capacity is not None:
                    self.capacity.start()
        self.app.counters.add(async_accepted=1)
        with self._lock:
            self._outstanding += 1
            if not self._jobs.queue:  # it is the oldest waiting now
                self.app.counters.set_value("async_oldest_waiting_since", job.received_at or time.time())
            self._jobs.put(job)

    def _taken(self, job: Job) -> None:
        """A worker took `job`: its time in the backlog, and the next oldest waiting (none: 0)."""
        self.app.counters.add(async_time_in_backlog_us_sum=(time.monotonic() - job.accepted) * 1e6)
        with self._lock:
            head = self._jobs.queue[0] if self._jobs.queue else None
            self.app.counters.set_value("async_oldest_waiting_since",
                                        (head.received_at or time.time()) if head is not None else 0.0)

    def _next(self, instance: int) -> Job | None:
        """The next request for a worker of `instance` (None: its instance is out of service, or none came)."""
        if self.capacity is None:
            return self._jobs.get()
        if not self.capacity.serves(instance):
            time.sleep(POLL_S)
            return None
        try:
            return self._jobs.get(timeout=POLL_S)
        except queue.Empty:
            return None

    def _work(self, instance: int = 0) -> None:
        while True:
            job = self._next(instance)
            if job is None:
                continue
            self._taken(job)
            try:
                self.process(job)
            except Exception as exc:  # a worker never dies: the request fails, named
                try:
                    self._fail(job, "InternalFailure", f"{type(exc).__name__}: {exc}")
                except Exception:  # S3 itself is gone (moto stopped first, or down): nowhere to write it
                    self.app.counters.add(async_failures=1)
            self.app.counters.add(async_total_processing_time_ms_sum=(time.monotonic() - job.accepted) * 1000.0)
            with self._lock:
                self._outstanding -= 1

    def process(self, job: Job) -> None:
        """Read the input, run the model for its service time, write the answer or the failure."""
        bucket, key = _object(job.input_location)
        try:
            body = self.s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        except Exception as exc:  # a missing or unreadable input object: the request fails, named
            self._fail(job, _error_code(exc), f"could not read the input {job.input_location}")
            return
        try:
            feat_ids, feat_vals = self.app.decode(body, job.content_type, job.attributes)
        except codecs.CodecError as exc:
            self._fail(job, "ModelError", str(exc))
            return
        service_s = self.app.service_s
        if service_s:
            time.sleep(service_s)
        probabilities = self.app.model.predict(feat_ids, feat_vals)
        try:
            out, out_type = codecs.encode_response(probabilities, job.accept)
        except codecs.CodecError as exc:
            self._fail(job, "ModelError", str(exc))
            return
        self._write(job.output_location, out, out_type, job)
        self.app.counters.add(async_results=1, invocations=1, successes=1, rows=len(feat_ids))
        self._notify(job, AsyncNotification(
            job.inference_id, COMPLETED, event_time=time.time(), received_time=job.received_at or None,
            output_location=job.output_location, input_location=job.input_location,
            endpoint_name=job.endpoint_name or None, content_type=job.content_type,
            output_content_type=out_type), self.config.success_topic)

    def _fail(self, job: Job, code: str, message: str) -> None:
        doc = orjson.dumps({"ErrorCode": code, "Message": message, "InferenceId": job.inference_id})
        self._write(job.failure_location, doc, "application/json", job)
        self.app.counters.add(async_failures=1)
        self._notify(job, AsyncNotification(
            job.inference_id, FAILED, event_time=time.time(), received_time=job.received_at or None,
            failure_reason=f"{code}: {message}", input_location=job.input_location,
            endpoint_name=job.endpoint_name or None, content_type=job.content_type),
            self.config.error_topic)

    def _notify(self, job: Job, note: AsyncNotification, topic: str) -> None:
        """Publish `note` to `topic` (none: nothing); a refused publish is counted, the answer stays in S3."""
        if not topic or self._sns is None:
            return
        try:
            self._sns.publish(TopicArn=topic, Message=note.to_json(topic.split(":")[3] or "us-east-1").decode())
            self.app.counters.add(async_notifications=1)
        except Exception:  # SNS down or the topic gone: the result is in S3; the count says so
            self.app.counters.add(async_notification_errors=1)

    def _write(self, uri: str, body: bytes, content_type: str, job: Job) -> None:
        bucket, key = _object(uri)
        elapsed_ms = (time.monotonic() - job.accepted) * 1000.0
        self.s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType=content_type,
                           Metadata={TIME_TO_RESULT_KEY: f"{elapsed_ms:.3f}"})


def _object(uri: str) -> tuple[str, str]:
    bucket, _, key = uri[5:].partition("/") if uri.startswith("s3://") else ("", "", "")
    if not bucket or not key:
        raise ValueError(f"not an s3://bucket/key URI: {uri!r}")
    return bucket, key
