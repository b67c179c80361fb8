"""`serve --async` against a moto S3, waited for by `--async-result s3`: what the endpoint wrote is
what the client counted, failures are failure objects, named; the time to result agrees."""

from __future__ import annotations

import gevent
import locust  # noqa: F401  (gevent monkey-patching before botocore)
from locust.env import Environment

import pytest

from sm_locust.config.options import parse_options
from sm_locust.endpoint.asyncqueue import TIME_TO_RESULT_KEY, AsyncEndpointConfig
from sm_locust.endpoint.server import LocalEndpoint
from sm_locust.invocation import INVOKE_ENDPOINT_ASYNC, Invocation
from sm_locust.plateau.asyncresults import RESULT
from sm_locust.transport import TRANSPORTS, create_client
from sm_locust.transport.asyncwait import AsyncLedger
from sm_locust.transport.options import async_waiter
from tests.conftest import SAMPLE_PAYLOAD
from tests.fakes import MotoServer

BUCKET = "async-bucket"
INPUT = f"s3://{BUCKET}/inputs/request.json"
SERVICE_MS = 300
WORKERS = 2
CALLS = 6


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    server = MotoServer(tmp_path_factory.mktemp("moto") / "moto_server.log")
    s3 = server.client()
    s3.create_bucket(Bucket=BUCKET)
    s3.put_object(Bucket=BUCKET, Key="inputs/request.json", Body=SAMPLE_PAYLOAD.read_bytes())
    yield server
    server.stop()


@pytest.fixture(scope="module")
def endpoint(moto, tmp_path_factory):
    config = AsyncEndpointConfig(output_path=f"s3://{BUCKET}/out", failure_path=f"s3://{BUCKET}/failed",
                                 max_concurrent=WORKERS, s3_url=moto.url)
    with LocalEndpoint(log_path=tmp_path_factory.mktemp("ep") / "endpoint.log", service_time_ms=SERVICE_MS,
                       async_inference=config) as ep:
        yield ep


def _send(endpoint, moto, monkeypatch, location: str, n: int, transport: str = "fast", **options):
    for key, value in moto.env().items():
        monkeypatch.setenv(key, value)
    env = Environment()
    events: list[dict] = []
    env.events.request.add_listener(lambda **kw: events.append(kw))
    client = create_client(transport, env, "ep", endpoint_url=endpoint.url)
    waiter = async_waiter(client, parse_options({"async_result": "s3", "async_input_location": location,
                                                 "async_poll_ms": 50, **options}))
    invocation = Invocation(body=b"", content_type="application/json")
    gevent.joinall([gevent.spawn(client.invoke_async, invocation, location, waiter=waiter) for _ in range(n)])
    return events, AsyncLedger.for_environment(env)


def _drained(endpoint) -> dict:
    """The endpoint's counters once every accepted request has been answered in S3 (a test that
    stopped waiting early leaves its request to finish before the next test counts)."""
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
def test_results_counted_are_results_written_and_the_time_agrees(endpoint, moto, monkeypatch):
    before, earlier = _drained(endpoint), set(moto.keys(BUCKET, "out/"))
    events, ledger = _send(endpoint, moto, monkeypatch, INPUT, CALLS)
    stats = endpoint.stats()
    written = {key for key in moto.keys(BUCKET, "out/") if key not in earlier}
    assert len(events) == CALLS and all(e["request_type"] == INVOKE_ENDPOINT_ASYNC for e in events)
    assert [e["exception"] for e in events] == [None] * CALLS
    assert stats["async_accepted"] - before["async_accepted"] == CALLS
    assert stats["async_results"] - before["async_results"] == CALLS == len(written)
    assert stats["async_failures"] == before["async_failures"]
    assert [c.outcome for c in ledger.calls] == [RESULT] * CALLS
    s3 = moto.client()
    own = [float(s3.head_object(Bucket=BUCKET, Key=key)["Metadata"][TIME_TO_RESULT_KEY]) for key in written]
    assert all(ms >= SERVICE_MS for ms in own)  # each held a worker for the service time (queueing: test below)
    client = [c.time_to_result_ms for c in ledger.calls]
    after_202 = [(c.seen_s - c.accepted_s) * 1000.0 for c in ledger.calls]  # the endpoint's clock starts there too
    resolution = max(c.resolution_ms for c in ledger.calls)
    figures = f"client {sorted(after_202)}, endpoint {sorted(own)}, resolution {resolution}"
    assert _median(client) >= _median(own), figures  # the client sees an object after it was written
    assert _median(after_202) - _median(own) <= resolution, figures  # ... by at most the polling resolution
    assert all(c.polls >= 2 for c in ledger.calls)  # a miss is 2 HeadObjects: output, then failure
    assert [e["response_time"] for e in events] == pytest.approx(client, abs=1.0)


@pytest.mark.e2e
@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_a_missing_input_object_fails_every_request_named(endpoint, moto, monkeypatch, transport):
    before = _drained(endpoint)
    events, ledger = _send(endpoint, moto, monkeypatch, f"s3://{BUCKET}/inputs/missing.json", 4, transport)
    stats = endpoint.stats()
    failures = moto.keys(BUCKET, "failed/")
    assert len(events) == 4 and all(e["exception"] is not None for e in events)
    names = {str(e["exception"]) for e in events}
    assert len(names) == 1
    [name] = names
    assert name.startswith("AsyncFailure: ") and "NoSuchKey" in name and "missing.json" in name
    assert stats["async_failures"] - before["async_failures"] == 4
    assert len(failures) == stats["async_failures"]  # one failure object per failure, across the tests
    assert stats["async_results"] == before["async_results"]
    assert all(c.outcome == name and c.time_to_result_ms is None for c in ledger.calls)


@pytest.mark.e2e
def test_no_result_within_the_timeout_is_named(endpoint, moto, monkeypatch):
    _drained(endpoint)
    events, ledger = _send(endpoint, moto, monkeypatch, INPUT, 1, async_timeout=0.05)
    _drained(endpoint)
    [event] = events
    assert str(event["exception"]) == "AsyncTimeout: no result within 0.05 s"
    assert ledger.calls[0].polls == 2
