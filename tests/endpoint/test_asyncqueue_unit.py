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
               "application/json", None, None, time.monotonic())


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
