"""Waiting for an async result: HeadObject polls, failure objects named, timeouts, the ledger."""

from __future__ import annotations

import argparse

import locust  # noqa: F401  (gevent monkey-patching before botocore)
from locust.env import Environment

import pytest
from botocore.exceptions import ClientError

from sm_locust.config.options import parse_options
from sm_locust.core.arguments import RunArguments, add_run_arguments
from sm_locust.core.plan import plan_run
from sm_locust.errors import UsageError
from sm_locust.invocation import INVOKE_ENDPOINT_ASYNC, Invocation
from sm_locust.plateau.asyncresults import RESULT, PollSchedule
from sm_locust.transport.asyncwait import AsyncLedger, ResultWaiter, split_s3_uri
from sm_locust.transport.contract import AsyncResult, SageMakerClient
from sm_locust.transport.options import async_result_mode, async_waiter
from tests.conftest import SAMPLE_PAYLOAD

ACCEPTED = AsyncResult("id-1", "s3://out/r/id-1.out", "s3://fail/r/id-1-error.out")


class FakeS3:
    """Objects appear at a given poll number; every HeadObject and GetObject is recorded."""

    def __init__(self, appear: dict[str, int] | None = None, bodies: dict[str, bytes] | None = None,
                 code: str = "404", clock: list[float] | None = None):
        self.clock = clock if clock is not None else [0.0]
        self.appear = appear or {}
        self.bodies = bodies or {}
        self.code = code
        self.heads: list[str] = []
        self.polls = 0

    def head_object(self, Bucket, Key):
        uri = f"s3://{Bucket}/{Key}"
        self.clock[0] += 0.005  # each HeadObject takes 5 ms
        self.heads.append(uri)
        if uri.startswith("s3://out/"):
            self.polls += 1
        if uri in self.appear and self.polls >= self.appear[uri]:
            return {}
        raise ClientError({"Error": {"Code": self.code, "Message": "x"}}, "HeadObject")

    def get_object(self, Bucket, Key, Range):
        assert Range == "bytes=0-1023"
        class Body:
            def __init__(self, data):
                self.data = data

            def read(self, n):
                return self.data[:n]
        return {"Body": Body(self.bodies[f"s3://{Bucket}/{Key}"])}


SCHEDULE = PollSchedule(100, 2, 400)


def _waiter(s3, timeout_s=10.0, schedule=SCHEDULE):
    """A waiter on `s3`'s clock: a sleep moves it on, as each HeadObject does."""
    slept: list[float] = []
    ledger = AsyncLedger()

    def sleep(seconds):
        slept.append(seconds)
        s3.clock[0] += seconds

    return ResultWaiter(s3, schedule, timeout_s, ledger, sleep=sleep, clock=lambda: s3.clock[0]), slept, ledger


def test_result_found_at_the_third_poll():
    s3 = FakeS3(appear={ACCEPTED.output_location: 3})
    waiter, slept, ledger = _waiter(s3)
    assert waiter.wait(ACCEPTED, 0.0, 1000.0) is None
    assert slept == [0.1, 0.2, 0.4]
    # each miss looks at the failure object too; the hit stops at the output
    assert s3.heads == [ACCEPTED.output_location, ACCEPTED.failure_location] * 2 + [ACCEPTED.output_location]
    [call] = ledger.calls
    assert (call.outcome, call.polls) == (RESULT, 5)
    # the object appeared after the second poll's output HeadObject was sent (t 0.31 s) and was seen
    # when the third one answered (t 0.725 s): the schedule's 400 ms plus the HeadObjects' time
    assert call.resolution_ms == pytest.approx(415)
    assert call.seen_s - call.accepted_s == pytest.approx(0.725)
    assert call.seen_s is not None and call.seen_s >= call.accepted_s >= call.sent_s == 1000.0


def test_failure_object_is_a_failure_named_by_its_content_sanitised():
    s3 = FakeS3(appear={ACCEPTED.failure_location: 2},
                bodies={ACCEPTED.failure_location: b"ModelError: \x1b[31mbad input\x1b[0m row 3\n" + b"x" * 5000})
    waiter, slept, ledger = _waiter(s3)
    error = waiter.wait(ACCEPTED, 0.0, 0.0)
    assert error is not None and error.code == "AsyncFailure"
    assert str(error).startswith("AsyncFailure: ModelError: ")
    assert "\x1b" not in str(error) and len(str(error)) < 1200
    assert len(slept) == 2
    assert ledger.calls[0].outcome == str(error) and ledger.calls[0].time_to_result_ms is None


def test_no_result_within_the_timeout_is_a_named_failure_after_every_poll():
    s3 = FakeS3()
    waiter, slept, ledger = _waiter(s3, timeout_s=1.0)
    error = waiter.wait(ACCEPTED, 0.0, 0.0)
    assert str(error) == "AsyncTimeout: no result within 1 s"
    assert slept == pytest.approx([0.1, 0.2, 0.4, 0.3])
    assert ledger.calls[0].polls == 8 == len(s3.heads)


def test_an_s3_error_other_than_not_found_fails_at_once():
    waiter, slept, _ = _waiter(FakeS3(code="AccessDenied"))
    error = waiter.wait(ACCEPTED, 0.0, 0.0)
    assert error.code == "AsyncPollError" and "AccessDenied" in str(error)
    assert len(slept) == 1


def test_a_stop_during_the_wait_leaves_the_call_awaited():
    ledger = AsyncLedger()

    def stop(_seconds):
        raise KeyboardInterrupt  # what a stopped greenlet sees: a BaseException

    waiter = ResultWaiter(FakeS3(), PollSchedule(), 10.0, ledger, sleep=stop)
    with pytest.raises(KeyboardInterrupt):
        waiter.wait(ACCEPTED, 0.0, 0.0)
    [call] = ledger.calls
    assert call.seen_s is None and call.outcome is None


def test_a_stop_while_the_output_is_fetched_leaves_the_call_awaited():
    """--async-fetch: a stop after the result was seen but before its output was read and checked leaves the
    call awaited (no outcome), never a failure named 'unknown' (CI read {'unknown': 2} for a stopped run)."""

    class StoppedFetch:
        def checked(self, result, check):
            raise KeyboardInterrupt  # what a stopped greenlet sees inside GetObject

    waiter, _, ledger = _waiter(FakeS3(appear={ACCEPTED.output_location: 1}))
    waiter.fetcher = StoppedFetch()
    with pytest.raises(KeyboardInterrupt):
        waiter.wait(ACCEPTED, 0.0, 0.0)
    [call] = ledger.calls
    assert call.seen_s is None and call.outcome is None


def test_ledger_ships_only_new_calls_and_the_master_merges_them():
    worker, master = AsyncLedger(), AsyncLedger()
    waiter = ResultWaiter(FakeS3(appear={ACCEPTED.output_location: 1}), PollSchedule(), 10.0, worker,
                          sleep=lambda s: None)
    waiter.wait(ACCEPTED, 0.0, 0.0)
    waiter.wait(ACCEPTED, 0.0, 0.0)
    delta = worker.take_delta()
    assert len(delta["calls"]) == 2 and worker.take_delta() is None
    master.merge_delta(delta, "w1")
    assert master.calls == worker.calls and master.active


class AcceptingClient(SageMakerClient):
    transport = "test"

    def _invoke(self, invocation):
        raise NotImplementedError

    def _stream(self, invocation, stream):
        raise NotImplementedError

    def _async(self, invocation, input_location):
        return ACCEPTED

    def error(self, exc, url=None):
        raise NotImplementedError


@pytest.mark.parametrize(("appear", "failed"), [({ACCEPTED.output_location: 2}, None),
                                                ({ACCEPTED.failure_location: 1}, "AsyncFailure: oops")])
def test_one_event_per_call_with_the_waiters_verdict(appear, failed):
    env = Environment()
    seen: list[dict] = []
    env.events.request.add_listener(lambda **kw: seen.append(kw))
    client = AcceptingClient(env, "ep")
    waiter, _, ledger = _waiter(FakeS3(appear=appear, bodies={ACCEPTED.failure_location: b"oops"}))
    result = client.invoke_async(Invocation(body=b""), "s3://in/x", waiter=waiter)
    [event] = seen
    assert event["request_type"] == INVOKE_ENDPOINT_ASYNC
    assert (None if event["exception"] is None else str(event["exception"])) == failed
    assert (result is None) == (failed is not None)
    assert len(ledger.calls) == 1


def test_the_options():
    assert async_result_mode(" S3 ") == "s3" and async_result_mode("none") == "none"
    url = "https://sqs.us-east-1.amazonaws.com/123456789012/q"
    assert async_result_mode(f" sqs:{url}") == f"sqs:{url}"
    for bad in ("sqs:", "sqs:q", "sqs:https://a b"):
        with pytest.raises(UsageError, match="queue's URL"):
            async_result_mode(bad)
    with pytest.raises(UsageError, match="unknown"):
        parse_options({"async_result": "sns"})
    options = parse_options({})
    assert (options.async_result, options.async_poll_ms, options.async_timeout) == ("none", 100.0, 900.0)
    with pytest.raises(UsageError, match="--async-poll-ms"):
        parse_options({"async_poll_ms": "0"})
    client = AcceptingClient(Environment(), "ep")
    assert async_waiter(client, options) is None
    with pytest.raises(UsageError, match="needs --async-input-location"):
        async_waiter(client, parse_options({"async_result": "s3"}))
    with pytest.raises(UsageError, match="--async-result sqs needs --async-input-location"):
        async_waiter(client, parse_options({"async_result": f"sqs:{url}"}))


def test_split_s3_uri():
    assert split_s3_uri("s3://b/k/x.out") == ("b", "k/x.out")
    for bad in ("s3://b", "https://b/k", "s3:///k"):
        with pytest.raises(ValueError):
            split_s3_uri(bad)


def test_run_refuses_s3_results_without_an_input_before_anything_starts():
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)

    def args(*argv):
        return vars(parser.parse_args(["--endpoint-name", "ep", "--payload", str(SAMPLE_PAYLOAD), *argv]))

    with pytest.raises(UsageError, match="needs --async-input-location"):
        plan_run(RunArguments.parse(args("--async-result", "s3")))
    planned = plan_run(RunArguments.parse(args("--async-result", "s3", "--async-input-location", "s3://b/in.json")))
    assert planned.options.async_result == "s3"


def test_the_async_shape_needs_calls_that_wait_for_their_results():
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)

    def args(*argv):
        return vars(parser.parse_args(["--endpoint-name", "ep", "--payload", str(SAMPLE_PAYLOAD), *argv]))

    with pytest.raises(UsageError, match="--shape async needs --async-result"):
        plan_run(RunArguments.parse(args("--shape", "async", "--async-input-location", "s3://b/in.json")))
    with pytest.raises(UsageError, match="conflicts with the async shape"):
        plan_run(RunArguments.parse(args("--shape", "async", "-u", "3", "--async-result", "s3",
                                         "--async-input-location", "s3://b/in.json")))
    planned = plan_run(RunArguments.parse(args("--shape", "async-search", "--async-result", "s3",
                                               "--async-input-location", "s3://b/in.json", "--start-rps", "2")))
    assert planned.shape == "async" and planned.shape_settings.start_rps == 2


class OutputS3(FakeS3):
    """FakeS3 whose GetObject without a range answers the whole output object (`--async-fetch`)."""

    def __init__(self, outputs: dict[str, bytes], **kw):
        super().__init__(**kw)
        self.outputs = outputs
        self.fetched: list[str] = []

    def get_object(self, Bucket, Key, Range=None):
        uri = f"s3://{Bucket}/{Key}"
        if Range is not None:
            return super().get_object(Bucket, Key, Range)
        self.fetched.append(uri)
        if uri not in self.outputs:
            raise ClientError({"Error": {"Code": "NoSuchKey", "Message": "gone"}}, "GetObject")

        class Body:
            def read(self, n):
                return outputs[uri][:n]
        outputs = self.outputs
        return {"Body": Body(), "ContentType": "application/json"}


class Expects:
    """A validator that wants `scores` in the answer (as --validate-response's are called)."""

    def __init__(self) -> None:
        self.seen: list[tuple[bytes, str | None]] = []

    def validate(self, body, content_type, invocation):
        from sm_locust.invocation import InvocationError

        self.seen.append((body, content_type))
        return None if b"scores" in body else InvocationError("InvalidResponse", "no scores")


@pytest.mark.parametrize(("output", "failed"), [(b'{"scores": [0.1]}', None),
                                                (b'{"oops": 1}', "InvalidResponse: no scores"),
                                                (None, "AsyncFetchError: GetObject NoSuchKey")])
def test_async_fetch_validates_the_output_as_a_synchronous_answer(output, failed):
    from sm_locust.transport.asyncwait import OutputFetcher

    env = Environment()
    seen: list[dict] = []
    env.events.request.add_listener(lambda **kw: seen.append(kw))
    client = AcceptingClient(env, "ep")
    client.validator = Expects()
    s3 = OutputS3({} if output is None else {ACCEPTED.output_location: output},
                  appear={ACCEPTED.output_location: 1})
    waiter, _, ledger = _waiter(s3)
    waiter.fetcher = OutputFetcher(s3)
    result = client.invoke_async(Invocation(body=b""), "s3://in/x", waiter=waiter)
    [event] = seen
    assert (event["exception"] is None) == (failed is None)
    if failed is not None:
        assert str(event["exception"]).startswith(failed)
    assert s3.fetched == [ACCEPTED.output_location] and (result is None) == (failed is not None)
    assert client.validator.seen == ([] if output is None else [(output, "application/json")])
    call = ledger.calls[0]  # the async figures count what the entry counted; the time the result was seen stands
    assert call.outcome == ("result" if failed is None else str(event["exception"])) and call.seen_s is not None


def test_async_fetch_needs_results_to_fetch():
    client = AcceptingClient(Environment(), "ep")
    with pytest.raises(UsageError, match="--async-fetch reads each result's output"):
        async_waiter(client, parse_options({"async_fetch": True, "async_input_location": "s3://in/x"}))
