"""`serve --async` with NotificationConfig's topics against a moto server (S3, SNS, SQS), waited for by
`--async-result sqs:QUEUE_URL`: results counted = notifications published = results written, failures
named from the notification, the time to result no sooner than the endpoint's own, no S3 polled."""

from __future__ import annotations

import gevent
import locust  # noqa: F401  (gevent monkey-patching before botocore)
from locust.env import Environment

import boto3
import orjson
import pytest

from sm_locust.aws.async_notification import parse
from sm_locust.config.options import parse_options
from sm_locust.endpoint.asyncqueue import TIME_TO_RESULT_KEY, AsyncEndpointConfig
from sm_locust.endpoint.server import LocalEndpoint
from sm_locust.invocation import INVOKE_ENDPOINT_ASYNC, Invocation
from sm_locust.plateau.asyncresults import RESULT
from sm_locust.transport import create_client
from sm_locust.transport.asyncnotify import NotificationWaiter
from sm_locust.transport.asyncwait import AsyncLedger
from sm_locust.transport.options import async_waiter
from tests.conftest import SAMPLE_PAYLOAD
from tests.fakes import MotoServer

BUCKET = "notify-bucket"
INPUT = f"s3://{BUCKET}/inputs/request.json"
SERVICE_MS = 200
WORKERS = 2
CALLS = 6


def _aws(moto, service):
    return boto3.client(service, endpoint_url=moto.url, region_name="us-east-1",
                        aws_access_key_id="testing", aws_secret_access_key="testing")


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    server = MotoServer(tmp_path_factory.mktemp("moto") / "moto_server.log")
    s3 = server.client()
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="inputs/request.json", Body=SAMPLE_PAYLOAD.read_bytes())
    sns, sqs = _aws(server, "sns"), _aws(server, "sqs")
    server.topics = {kind: sns.create_topic(Name=f"async-{kind}")["TopicArn"] for kind in ("success", "error")}
    server.queue_url = sqs.create_queue(QueueName="async-results")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=server.queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    for topic in server.topics.values():
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def endpoint(moto, tmp_path_factory):
    config = AsyncEndpointConfig(output_path=f"s3://{BUCKET}/out", failure_path=f"s3://{BUCKET}/failed",
                                 max_concurrent=WORKERS, s3_url=moto.url, success_topic=moto.topics["success"],
                                 error_topic=moto.topics["error"], sns_url=moto.url)
    with LocalEndpoint(log_path=tmp_path_factory.mktemp("ep") / "endpoint.log", service_time_ms=SERVICE_MS,
                       async_inference=config) as ep:
        yield ep


def _send(endpoint, moto, monkeypatch, location: str, n: int, **options):
    for key, value in {**moto.env(), "AWS_ENDPOINT_URL_SQS": moto.url}.items():
        monkeypatch.setenv(key, value)
    env = Environment()
    events: list[dict] = []
    env.events.request.add_listener(lambda **kw: events.append(kw))
    client = create_client("fast", env, "ep", endpoint_url=endpoint.url)
    waiter = async_waiter(client, parse_options({"async_result": f"sqs:{moto.queue_url}",
                                                 "async_input_location": location, **options}))
    assert isinstance(waiter, NotificationWaiter)
    invocation = Invocation(body=b"", content_type="application/json")
    gevent.joinall([gevent.spawn(client.invoke_async, invocation, location, waiter=waiter) for _ in range(n)])
    return events, AsyncLedger.for_environment(env)


def _drained(endpoint) -> dict:
    for _ in range(200):
        stats = endpoint.stats()
        if stats["async_accepted"] == stats["async_results"] + stats["async_failures"]:
            return stats
        gevent.sleep(0.05)
    raise AssertionError(f"the endpoint's queue did not drain: {stats}")


def _median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


@pytest.mark.e2e
def test_results_come_from_the_notifications_and_agree_with_what_was_written(endpoint, moto, monkeypatch):
    before, earlier = _drained(endpoint), set(moto.keys(BUCKET, "out/"))
    events, ledger = _send(endpoint, moto, monkeypatch, INPUT, CALLS)
    stats = endpoint.stats()
    written = {key for key in moto.keys(BUCKET, "out/") if key not in earlier}
    assert len(events) == CALLS and all(e["request_type"] == INVOKE_ENDPOINT_ASYNC for e in events)
    assert [e["exception"] for e in events] == [None] * CALLS
    assert stats["async_results"] - before["async_results"] == CALLS == len(written)
    assert stats["async_notifications"] - before["async_notifications"] == CALLS
    assert stats["async_notification_errors"] == 0
    assert [c.outcome for c in ledger.calls] == [RESULT] * CALLS
    assert all(c.polls == 0 for c in ledger.calls)  # nothing polled in S3
    s3 = moto.client()
    own = [float(s3.head_object(Bucket=BUCKET, Key=key)["Metadata"][TIME_TO_RESULT_KEY]) for key in written]
    after_202 = [(c.seen_s - c.accepted_s) * 1000.0 for c in ledger.calls]
    figures = f"client after the 202 {sorted(after_202)}, endpoint {sorted(own)}"
    assert _median(after_202) >= _median(own), figures  # the notification follows the written answer
    assert all(c.resolution_ms is not None and c.resolution_ms >= 0 for c in ledger.calls)  # its delivery
    client = [c.time_to_result_ms for c in ledger.calls]
    assert [e["response_time"] for e in events] == pytest.approx(client, abs=1.0)


@pytest.mark.e2e
def test_a_missing_input_fails_every_request_named_from_its_notification(endpoint, moto, monkeypatch):
    before = _drained(endpoint)
    events, ledger = _send(endpoint, moto, monkeypatch, f"s3://{BUCKET}/inputs/missing.json", 3)
    stats = endpoint.stats()
    names = {str(e["exception"]) for e in events}
    assert len(events) == 3 and len(names) == 1
    [name] = names
    assert name.startswith("AsyncFailure: NoSuchKey: ") and "missing.json" in name
    assert stats["async_failures"] - before["async_failures"] == 3
    assert stats["async_notifications"] - before["async_notifications"] == 3
    assert all(c.outcome == name and c.time_to_result_ms is None for c in ledger.calls)


@pytest.mark.e2e
def test_the_published_message_is_sagemakers_notification(moto, endpoint, monkeypatch):
    """What the endpoint publishes, read raw from a queue of its own: the documented keys."""
    sqs, sns = _aws(moto, "sqs"), _aws(moto, "sns")
    url = sqs.create_queue(QueueName="raw-look")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=moto.topics["success"], Protocol="sqs", Endpoint=arn)
    _drained(endpoint)
    _send(endpoint, moto, monkeypatch, INPUT, 1)
    messages = []
    for _ in range(20):
        messages += sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages") or []
        if messages:
            break
    assert messages, "no notification reached the second queue"
    envelope = orjson.loads(messages[0]["Body"])
    assert envelope["Type"] == "Notification" and envelope["TopicArn"] == moto.topics["success"]
    message = orjson.loads(envelope["Message"])
    assert {"awsRegion", "eventTime", "receivedTime", "invocationStatus", "requestParameters",
            "responseParameters", "inferenceId", "eventVersion", "eventSource", "eventName"} <= set(message)
    assert (message["invocationStatus"], message["eventSource"], message["eventName"]) == (
        "Completed", "aws:sagemaker", "InferenceResult")
    assert message["requestParameters"]["inputLocation"] == INPUT
    assert message["responseParameters"]["outputLocation"].startswith(f"s3://{BUCKET}/out/")
    note = parse(messages[0]["Body"])
    assert note is not None and note.event_time is not None and note.received_time is not None
    assert note.event_time - note.received_time >= SERVICE_MS / 1000.0  # accepted -> answered
