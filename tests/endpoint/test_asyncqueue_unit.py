"""The async queue without a server: no more than MaxConcurrentInvocationsPerInstance at once, every
job answered once, failures as documents at the FailureLocation."""

from __future__ import annotations

import threading
import time

import orjson
import pytest

from sm_locust.endpoint import codecs
from sm_locust.endpoint.asyncqueue import TIME_TO_RESULT_KEY, AsyncEndpointConfig, AsyncQueue, Job
from sm_locust.endpoint.counters import SharedCounters
from sm_locust.endpoint.model import RankingModel
from tests.conftest import SAMPLE_PAYLOAD


class FakeS3:
    def __init__(self):
        self.lock = threading.Lock()
        self.busy = self.peak = 0
        self.objects: dict[str, tuple[bytes, dict]] = {"s3://b/in.json": (SAMPLE_PAYLOAD.read_bytes(), {})}
        self.done = threading.Semaphore(0)

    def get_object(self, Bucket, Key):
        uri = f"s3://{Bucket}/{Key}"
        if uri not in self.objects:
            raise FakeNoSuchKey()
        with self.lock:
            self.busy += 1
            self.peak = max(self.peak, self.busy)

        class Body:
            def read(inner):
                return self.objects[uri][0]
        return {"Body": Body()}

    def put_object(self, Bucket, Key, Body, ContentType, Metadata):
        with self.lock:
            if not Key.startswith("err/"):
                self.busy -= 1
            self.objects[f"s3://{Bucket}/{Key}"] = (Body, Metadata)
        self.done.release()


class FakeNoSuchKey(Exception):
    response = {"Error": {"Code": "NoSuchKey", "Message": "The specified key does not exist."}}


class App:
    counters = SharedCounters()
    service_s = 0.05
    model = RankingModel()

    @staticmethod
    def decode(body, content_type, attributes):
        return codecs.decode_request(body, content_type, attributes)


def _job(config, i, location="s3://b/in.json"):
    return Job(f"id{i}", location, config.output_location(f"id{i}"), config.failure_location(f"id{i}"),
               "application/json", None, None, time.monotonic(), received_at=time.time())


def test_no_more_than_the_workers_at_once_and_every_job_answered_once():
    config = AsyncEndpointConfig("s3://b/out", "s3://b/err", max_concurrent=2)
    s3 = FakeS3()
    queue = AsyncQueue(config, App(), s3=s3)
    for i in range(8):
        queue.submit(_job(config, i))
    for _ in range(8):
        assert s3.done.acquire(timeout=20)
    outputs = sorted(k for k in s3.objects if k.startswith("s3://b/out/"))
    assert outputs == sorted(f"s3://b/out/id{i}.out" for i in range(8))
    assert s3.peak == 2
    waits = sorted(float(s3.objects[k][1][TIME_TO_RESULT_KEY]) for k in outputs)
    assert waits[-1] >= 4 * 50  # the last of 8 on 2 workers waited for 3 rounds before its own


def test_a_missing_input_is_a_failure_document_named():
    config = AsyncEndpointConfig("s3://b/out", "s3://b/err", max_concurrent=1)
    s3 = FakeS3()
    AsyncQueue(config, App(), s3=s3).submit(_job(config, 1, "s3://b/nothing.json"))
    assert s3.done.acquire(timeout=20)
    body, _ = s3.objects["s3://b/err/id1-error.out"]
    assert orjson.loads(body) == {"ErrorCode": "NoSuchKey", "Message": "could not read the input s3://b/nothing.json",
                                  "InferenceId": "id1"}


@pytest.mark.parametrize(("path", "failures"), [("s3://b/out", "s3://b/out/failures/x-error.out"),
                                                ("s3://b", "s3://b/failures/x-error.out")])
def test_locations(path, failures):
    config = AsyncEndpointConfig(path)
    assert config.failure_location("x") == failures
    assert config.output_location("x").endswith("/x.out")
    with pytest.raises(ValueError, match="--async-output-path"):
        AsyncEndpointConfig("http://b/out").validate()
    with pytest.raises(ValueError, match="--async-max-concurrent"):
        AsyncEndpointConfig("s3://b", max_concurrent=0).validate()


class FakeSNS:
    def __init__(self, refuse: bool = False):
        self.published: list[tuple[str, str]] = []
        self.refuse = refuse

    def publish(self, TopicArn, Message):
        if self.refuse:
            raise RuntimeError("topic gone")
        self.published.append((TopicArn, Message))


SUCCESS_TOPIC = "arn:aws:sns:eu-west-1:123456789012:ok"
ERROR_TOPIC = "arn:aws:sns:eu-west-1:123456789012:bad"


def test_each_answer_is_announced_on_its_topic_after_it_is_written():
    from sm_locust.aws.async_notification import parse

    config = AsyncEndpointConfig("s3://b/out", "s3://b/err", success_topic=SUCCESS_TOPIC,
                                 error_topic=ERROR_TOPIC).validate()
    s3, sns, app = FakeS3(), FakeSNS(), App()
    app.counters = SharedCounters()
    queue = AsyncQueue(config, app, s3=s3, sns=sns)
    queue.process(_job(config, 1))
    queue.process(_job(config, 2, "s3://b/nothing.json"))
    assert [topic for topic, _ in sns.published] == [SUCCESS_TOPIC, ERROR_TOPIC]
    ok, bad = (parse(message) for _, message in sns.published)
    assert ok is not None and ok.succeeded and ok.output_location == "s3://b/out/id1.out"
    assert bad is not None and not bad.succeeded and bad.failure_reason == (
        "NoSuchKey: could not read the input s3://b/nothing.json")
    assert ok.event_time is not None and ok.received_time is not None and ok.event_time >= ok.received_time
    assert '"awsRegion":"eu-west-1"' in sns.published[0][1]
    stats = app.counters.snapshot()
    assert (stats["async_notifications"], stats["async_notification_errors"]) == (2, 0)


def test_a_refused_publish_is_counted_and_the_answer_stays_written():
    config = AsyncEndpointConfig("s3://b/out", "s3://b/err", success_topic=SUCCESS_TOPIC)
    s3, app = FakeS3(), App()
    app.counters = SharedCounters()
    AsyncQueue(config, app, s3=s3, sns=FakeSNS(refuse=True)).process(_job(config, 1))
    assert "s3://b/out/id1.out" in s3.objects
    stats = app.counters.snapshot()
    assert (stats["async_results"], stats["async_notifications"], stats["async_notification_errors"]) == (1, 0, 1)


def test_topics_are_checked_and_given_back_as_flags():
    for bad in ("ok", "arn:aws:sqs:us-east-1:123456789012:q", "arn:aws:sns:us-east-1:12:t"):
        with pytest.raises(ValueError, match="--async-success-topic"):
            AsyncEndpointConfig("s3://b", success_topic=bad).validate()
    config = AsyncEndpointConfig("s3://b", success_topic=SUCCESS_TOPIC, error_topic=ERROR_TOPIC,
                                 sns_url="http://127.0.0.1:5000")
    flags = config.flags()
    assert flags[flags.index("--async-success-topic") + 1] == SUCCESS_TOPIC
    assert flags[flags.index("--async-error-topic") + 1] == ERROR_TOPIC
    assert flags[flags.index("--async-sns-url") + 1] == "http://127.0.0.1:5000"
    assert "--async-success-topic" not in AsyncEndpointConfig("s3://b").flags()
