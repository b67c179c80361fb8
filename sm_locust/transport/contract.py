"""The transport contract: what every SageMaker Runtime client takes, returns and reports.

Everything but the wire lives here once, so a test reads the same whichever client sends it: one
constructor, one result family (`InvokeResult`, `StreamResult`, `AsyncResult`; None after a reported
failure), one timing helper (`Measurement`: milliseconds from `perf_counter`, or from an open-loop
`started`; exactly one `request` event per block), and the operations built on the primitives a
transport implements (`_invoke`, `_stream`, `_async`, `error`). A `validator` checks a success's body
after its response time is taken. Failures are reported, never raised into a User; a stream with an
in-band error is a failure named by it, although SageMaker answered 200. Entries: docs/transport.md.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING, Any, Protocol

from sm_locust.errors import UsageError
from sm_locust.invocation import (
    INTER_CHUNK,
    INVOKE_ENDPOINT,
    INVOKE_ENDPOINT_ASYNC,
    INVOKE_ENDPOINT_STREAM,
    TTFT,
    Invocation,
    InvocationError,
)
from sm_locust.llm.tokens import LINE_TOO_LONG
from sm_locust.transport.inflight import StoppedRequests

if TYPE_CHECKING:
    from locust.env import Environment
    from locust.event import EventHook

    from sm_locust.aws.clients import FrozenCredentialsSource

DEFAULT_POOL_SIZE = 1024
DEFAULT_CONNECT_TIMEOUT_S = 5.0
DEFAULT_READ_TIMEOUT_S = 60.0

INTER_CHUNK_MODES = ("mean", "each", "none")
INVALID_RESPONSE = "InvalidResponse"

_perf_counter = time.perf_counter
_time = time.time


# -- results ----------------------------------------------------------------------------------


@dataclass(slots=True)
class InvokeResult:
    """A successful InvokeEndpoint: the whole body, its content type, the invoked variant, and the
    milliseconds it waited for its model's download and load when the endpoint says so
    (`invocation.MODEL_WAIT_HEADER`, the local multi-model emulation's; in the event's context as
    `model_wait_ms` when present)."""

    body: bytes
    content_type: str | None = None
    variant: str | None = None
    model_wait_ms: float | None = None


@dataclass(slots=True)
class StreamResult(InvokeResult):
    """A completed InvokeEndpointWithResponseStream: `body` is the PayloadPart bytes joined, in order.

    `ttft_ms`: call start -> first PayloadPart; `inter_chunk_ms`: the gaps between consecutive
    PayloadParts; `tokens`: the client's `token_counter` on the body (None without one).
    """

    chunks: list[bytes] = field(default_factory=list)
    ttft_ms: float | None = None
    inter_chunk_ms: list[float] = field(default_factory=list)
    tokens: int | None = None


@dataclass(slots=True)
class AsyncResult:
    """An accepted InvokeEndpointAsync (HTTP 202): where the result and a failure will be written."""

    inference_id: str | None = None
    output_location: str | None = None
    failure_location: str | None = None


# -- the validation hook ----------------------------------------------------------------------


class Validator(Protocol):
    def validate(self, body: bytes, content_type: str | None,
                 invocation: Invocation | None) -> InvocationError | None: ...


def check_response(validator: Any, body: bytes, content_type: str | None,
                   invocation: Invocation | None) -> InvocationError | None:
    """The validator's verdict on one response; a validator that raises counts as InvalidResponse."""
    try:
        return validator.validate(body, content_type, invocation)
    except Exception as exc:  # never raised into the User
        return InvocationError(INVALID_RESPONSE, f"validator raised {type(exc).__name__}: {exc}")


# -- timing and reporting ---------------------------------------------------------------------


def wait_ms(value: str | None) -> float | None:
    """The model wait header's value as milliseconds; None when absent or not a number."""
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def name_exception(exc: BaseException, url: str | None = None) -> InvocationError:
    """The default failure name: an InvocationError as is, anything else by its class."""
    if isinstance(exc, InvocationError):
        return exc
    return InvocationError(type(exc).__name__, str(exc))


class Measurement:
    """One timed request; fires one Locust `request` event when its `with` block ends.

    Like `EventHook.measure()`: an `Exception` raised in the block is the failure (named by
    `to_error(exc, url)`, never re-raised); a `BaseException` (GreenletExit when Locust stops the
    User, KeyboardInterrupt) passes through without an event, and `stopped(request_type, name)` is
    called (`inflight.StoppedRequests`: requests in flight at the stop are counted). Inside the block set
    `response_length`, `exception` (a failure that was not raised, e.g. a rejected body) and
    `context`; `stop()` ends the response time early (work after it is not timed).
    """

    __slots__ = ("_event", "request_type", "name", "context", "url", "started", "start_time", "end",
                 "response_length", "exception", "_to_error", "_stopped")

    def __init__(self, event: EventHook, request_type: str, name: str, context: dict | None = None,
                 url: str | None = None, started: float | None = None,
                 to_error: Callable[[BaseException, str | None], InvocationError] = name_exception,
                 stopped: Callable[[str, str], None] | None = None):
        now = _perf_counter()
        if started is None:
            self.started, self.start_time = now, _time()
        else:  # an intended send time: the wait before sending is part of the response time
            self.started, self.start_time = started, _time() - (now - started)
        self._event = event
        self.request_type = request_type
        self.name = name
        self.context = context
        self.url = url
        self.end: float | None = None
        self.response_length = 0
        self.exception: InvocationError | None = None
        self._to_error = to_error
        self._stopped = stopped

    def stop(self) -> None:
        """The response time ends now (the event still fires at the end of the block)."""
        self.end = _perf_counter()

    def fire(self, request_type: str, response_time: float, response_length: int,
             exception: BaseException | None, context: dict | None) -> None:
        """The one place a Locust `request` event is fired (same name, start time and URL)."""
        self._event.fire(request_type=request_type, name=self.name, response_time=response_time,
                         response_length=response_length, exception=exception,
                         context=context if context is not None else {}, start_time=self.start_time, url=self.url)

    def __enter__(self) -> Measurement:
        return self

    def __exit__(self, kind, exc, traceback) -> bool:
        end = self.end if self.end is not None else _perf_counter()
        if exc is not None:
            if not isinstance(exc, Exception):  # the User is being stopped: no event, but counted
                if self._stopped is not None:
                    self._stopped(self.request_type, self.name)
                return False
            self.exception = self._to_error(exc, self.url)
        self.finish(end)
        return True

    def finish(self, end: float) -> None:
        self.fire(self.request_type, (end - self.started) * 1000.0, self.response_length, self.exception, self.context)


def measure(event: EventHook, request_type: str, name: str, context: dict | None = None, *, url: str | None = None,
            started: float | None = None, stopped: Callable[[str, str], None] | None = None) -> Measurement:
    """`with measure(environment.events.request, "InvokeEndpointSplit", name) as request: ...`"""
    return Measurement(event, request_type, name, context, url=url, started=started, stopped=stopped)


class StreamMeasurement(Measurement):
    """A response stream: `opened()` when the answer starts, `chunk()` per PayloadPart.

    Fires `TTFT` as soon as the first chunk is in (call start -> that chunk), then at the end
    `InterChunk` (`mean`: one entry per stream of 2+ chunks, the mean gap, length = gaps; `each`:
    one per gap; `none`) and the stream entry (whole call, payload bytes, the failure if any, the
    stream's statistics in `context`). `result` is the StreamResult after a success, else None. The
    failure is the exception raised while reading, else the in-band error the client's
    `chunk_listener` found in the payload (the first), so a container's error event fails the stream.
    """

    __slots__ = ("chunks", "arrivals", "content_type", "variant", "extra", "inter_chunk", "token_counter",
                 "endpoint", "result", "on_chunk", "in_band")

    def __init__(self, client: SageMakerClient, name: str, *, url: str | None, started: float | None,
                 context: dict | None):
        super().__init__(client.request_event, INVOKE_ENDPOINT_STREAM, name,
                         {"endpoint": client.endpoint_name, **(context or {})},
                         url=url, started=started, to_error=client.error, stopped=client.stopped_request)
        self.endpoint = client.endpoint_name
        self.extra = context
        self.inter_chunk = client.inter_chunk
        self.token_counter = client.token_counter
        self.on_chunk = client.chunk_listener
        self.chunks: list[bytes] = []
        self.arrivals: list[float] = []
        self.content_type: str | None = None
        self.variant: str | None = None
        self.result: StreamResult | None = None
        self.in_band: InvocationError | None = None

    def opened(self, content_type: str | None, variant: str | None, model_wait_ms: float | None = None) -> None:
        """The answer's headers are in: its content type, variant, and the model wait the endpoint reported
        (`invocation.MODEL_WAIT_HEADER`: then `TTFT` and the stream entry carry `model_wait_ms`)."""
        self.content_type, self.variant = content_type, variant
        if model_wait_ms is not None:
            self.context = {**(self.context or {}), "model_wait_ms": model_wait_ms}
            self.extra = {**(self.extra or {}), "model_wait_ms": model_wait_ms}

    def chunk(self, payload: bytes, now: float) -> None:
        """A PayloadPart whose last byte arrived at `now` (perf_counter)."""
        self.chunks.append(payload)
        self.arrivals.append(now)
        if self.on_chunk is not None:
            failure = self.on_chunk(payload)
            if failure is not None and self.in_band is None:
                self.in_band = failure
                if failure.code == LINE_TOO_LONG:  # an event that never ends: stop reading the stream now
                    raise failure
        if len(self.chunks) == 1:
            self.fire(TTFT, (now - self.started) * 1000.0, len(payload), None, self.context)

    def finish(self, end: float) -> None:
        if self.exception is None and self.in_band is not None:
            self.exception = self.in_band  # the container failed in-band: the stream is a failure, named by it
        arrivals = self.arrivals
        gaps = [(b - a) * 1000.0 for a, b in pairwise(arrivals)]
        if gaps and self.inter_chunk == "mean":
            self.fire(INTER_CHUNK, sum(gaps) / len(gaps), len(gaps), None, self.context)
        elif gaps and self.inter_chunk == "each":
            for gap in gaps:
                self.fire(INTER_CHUNK, gap, 1, None, self.context)
        body = b"".join(self.chunks)
        tokens = self.token_counter(body) if self.token_counter is not None else None
        ttft_ms = (arrivals[0] - self.started) * 1000.0 if arrivals else None
        context = {"endpoint": self.endpoint, "variant": self.variant, **(self.extra or {}),
                   "chunks": len(self.chunks), "tokens": tokens, "ttft_ms": ttft_ms, "inter_chunk_ms": gaps}
        self.fire(INVOKE_ENDPOINT_STREAM, (end - self.started) * 1000.0, len(body), self.exception, context)
        if self.exception is None:
            self.result = StreamResult(body, self.content_type, self.variant, (self.extra or {}).get("model_wait_ms"),
                                       chunks=self.chunks, ttft_ms=ttft_ms, inter_chunk_ms=gaps, tokens=tokens)


# -- the client -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClientSettings:
    """Where and how a client connects: the contract's connection keyword arguments, in one object."""

    region: str | None = None
    endpoint_url: str | None = None
    profile: str | None = None
    pool_size: int = DEFAULT_POOL_SIZE
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S
    read_timeout: float = DEFAULT_READ_TIMEOUT_S
    credentials: FrozenCredentialsSource | None = field(default=None, repr=False)


class SageMakerClient(ABC):
    """Invokes one endpoint and reports every call as Locust `request` events (never raises).

    Build one with `sm_locust.transport.create_client(transport, environment, endpoint_name, ...)`
    or a transport's class (`FastSageMakerClient`, `Boto3SageMakerClient`): both take this
    constructor (plus their own keyword extras, passing the rest here) and read `self.settings`.
    A subclass implements `_invoke`, `_stream`, `_async` and `error`.

    :param environment: the Locust Environment whose `events.request` gets every call
    :param endpoint_name: the SageMaker endpoint
    :param region: signing region; None = the AWS chain (AWS_REGION, the profile), `us-east-1`
        for an `endpoint_url` when the chain has none
    :param endpoint_url: runtime URL (local endpoint, VPC endpoint); None = the AWS chain
        (AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME, AWS_ENDPOINT_URL), then the regional AWS host
    :param profile: AWS profile for credentials and region; None = the default chain
    :param pool_size: keep-alive connections (size it to the users sharing the client)
    :param connect_timeout: seconds to open a connection (ConnectTimeoutError)
    :param read_timeout: seconds of socket silence tolerated (ReadTimeoutError; between chunks too)
    :param credentials: a botocore credentials object; None = the profile / default chain
    :param token_counter: `f(stream body) -> int` for streams (sm_locust.transport.tokens)
    :param inter_chunk: InterChunk entries per stream: `mean`, `each` or `none`
    """

    transport: str = ""
    """The registry name (`fast`, `boto3`)."""

    validator: Any = None
    """Optional response check (see `check_response`); None = off."""

    chunk_listener: Callable[[bytes], InvocationError | None] | None = None
    """Called with each PayloadPart as it arrives, in the calling greenlet (live token counts,
    record/llm.py); it returns the stream's in-band error once it sees one (an LLM container's error
    event, `sm_locust.llm.errors`), which makes the stream a failure; None = off."""

    def __init__(
        self,
        environment: Environment,
        endpoint_name: str,
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        profile: str | None = None,
        pool_size: int = DEFAULT_POOL_SIZE,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
        read_timeout: float = DEFAULT_READ_TIMEOUT_S,
        credentials: FrozenCredentialsSource | None = None,
        token_counter: Callable[[bytes], int] | None = None,
        inter_chunk: str = "mean",
    ):
        if not endpoint_name:
            raise UsageError(f"{type(self).__name__} needs an endpoint name")
        if environment is None:
            raise UsageError(f"{type(self).__name__} needs the Locust environment (for its events)")
        if inter_chunk not in INTER_CHUNK_MODES:
            raise UsageError(f"inter_chunk {inter_chunk!r} is not one of {', '.join(INTER_CHUNK_MODES)}")
        self.environment = environment
        self.request_event = environment.events.request
        self.stopped_request = StoppedRequests.for_environment(environment).stopped
        """Called with (request type, name) for a request the stop cut short (transport/inflight.py)."""
        self.endpoint_name = endpoint_name
        self.settings = ClientSettings(region, endpoint_url, profile, pool_size, connect_timeout, read_timeout,
                                       credentials)
        """Where and how to connect; the transport reads it after this constructor."""
        self.token_counter = token_counter
        self.inter_chunk = inter_chunk
        self.urls: dict[str, str | None] = dict.fromkeys((INVOKE_ENDPOINT, INVOKE_ENDPOINT_STREAM,
                                                          INVOKE_ENDPOINT_ASYNC))
        """The URL each operation's events carry (None when the transport does not know it)."""

    # -- what a transport implements --

    @abstractmethod
    def _invoke(self, invocation: Invocation) -> InvokeResult:
        """InvokeEndpoint: the whole answer, or raise (an InvocationError, or anything `error` names)."""

    @abstractmethod
    def _stream(self, invocation: Invocation, stream: StreamMeasurement) -> None:
        """InvokeEndpointWithResponseStream: `stream.opened(...)`, then `stream.chunk(payload, now)`
        per PayloadPart, reading the body to its end; raise on failure (also mid-stream)."""

    @abstractmethod
    def _async(self, invocation: Invocation, input_location: str | None) -> AsyncResult:
        """InvokeEndpointAsync for the S3 input at `input_location` (no body sent), or raise."""

    @abstractmethod
    def error(self, exc: BaseException, url: str | None = None) -> InvocationError:
        """A raised failure named as botocore names it (`ThrottlingException: Rate exceeded`)."""

    def close(self) -> None:  # noqa: B027 (optional: a client without a pool of its own has nothing to release)
        """Release the connections."""

    # -- the operations, reported once for every transport --

    def invoke(self, invocation: Invocation, name: str | None = None, *, started: float | None = None,
               context: dict | None = None) -> InvokeResult | None:
        """InvokeEndpoint; the result, or None after reporting the failure."""
        return self.send(invocation, name, started=started, context=context)[0]

    def send(self, invocation: Invocation, name: str | None = None, *, started: float | None = None,
             context: dict | None = None) -> tuple[InvokeResult | None, InvocationError | None]:
        """`invoke`, also returning the failure (None on success); one event either way (fan-out uses it).

        `started` is the `time.perf_counter()` time the response time counts from (default: now);
        open-loop senders pass the intended send time, so a late send is not hidden.
        """
        ctx: dict[str, object] = {"endpoint": self.endpoint_name, "variant": None, "target": invocation.target}
        if context:
            ctx.update(context)
        request = Measurement(self.request_event, INVOKE_ENDPOINT, name or invocation.request_name(self.endpoint_name),
                              ctx, self.urls[INVOKE_ENDPOINT], started, self.error, self.stopped_request)  # hot path
        result = None
        with request:
            result = self._invoke(invocation)
            request.stop()
            request.response_length = len(result.body)
            ctx["variant"] = result.variant
            if result.model_wait_ms is not None:
                ctx["model_wait_ms"] = result.model_wait_ms
            if self.validator is not None:
                request.exception = check_response(self.validator, result.body, result.content_type, invocation)
        if request.exception is not None:
            return None, request.exception
        return result, None

    def invoke_stream(self, invocation: Invocation, name: str | None = None, *, started: float | None = None,
                      context: dict | None = None) -> StreamResult | None:
        """InvokeEndpointWithResponseStream, read to its end: `TTFT`, `InterChunk` and the stream entry."""
        stream = StreamMeasurement(self, name or invocation.request_name(self.endpoint_name),
                                   url=self.urls[INVOKE_ENDPOINT_STREAM], started=started,
                                   context={"target": invocation.target, **(context or {})})
        with stream:
            self._stream(invocation, stream)
        return stream.result

    def invoke_async(self, invocation: Invocation, input_location: str | None = None, name: str | None = None, *,
                     started: float | None = None, context: dict | None = None,
                     waiter: Any = None) -> AsyncResult | None:
        """InvokeEndpointAsync for the S3 object at `input_location` (the body is not sent: the input is
        the S3 object); one `InvokeEndpointAsync` event. Without a `waiter` it times the acceptance;
        with one (`transport.asyncwait.ResultWaiter`, `--async-result s3`) the call waits for the
        result and the event times call start -> result seen, failing as the waiter names it."""
        result = None
        request = Measurement(self.request_event, INVOKE_ENDPOINT_ASYNC,
                              name or invocation.request_name(self.endpoint_name),
                              {"endpoint": self.endpoint_name, "target": invocation.target, **(context or {})},
                              url=self.urls[INVOKE_ENDPOINT_ASYNC],
                              started=started, to_error=self.error, stopped=self.stopped_request)
        with request:
            result = self._async(invocation, input_location)
            if waiter is not None:
                validator = self.validator

                def check(body: bytes, content_type: str | None) -> InvocationError | None:
                    """--async-fetch: the output, validated as a synchronous answer is."""
                    return check_response(validator, body, content_type, invocation)

                request.exception = waiter.wait(result, request.started, request.start_time, request,
                                                check=check if validator is not None else None)
        return result if request.exception is None else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.endpoint_name!r}, endpoint_url={self.urls[INVOKE_ENDPOINT]!r})"
