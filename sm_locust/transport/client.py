"""`FastSageMakerClient`: SageMaker Runtime over geventhttpclient, SigV4-signed, no boto3.

One client owns one keep-alive connection pool to the runtime host and reports every call through
Locust's `request` event, like `locust.contrib.fasthttp.FastHttpSession` does for plain HTTP:

| call | request_type | name |
|---|---|---|
| `invoke` | `InvokeEndpoint` | `invocation.request_name(endpoint)` |
| `invoke_stream` | `InvokeEndpointWithResponseStream` (whole stream) | same |
| | `TTFT` (request start -> first PayloadPart) | same |
| | `InterChunk` (gap between PayloadParts, mean per stream or each) | same |
| `invoke_async` | `InvokeEndpointAsync` | same |

`response_time` is milliseconds from `time.perf_counter()`, taken before signing (the boto3 user
times the whole call the same way). `context` is `{"endpoint", "variant"}` (the invoked production
variant, as the boto3 client reports it) updated with the caller's `context=`. A failure is an
`InvocationError` named as botocore names it (`ThrottlingException: Rate exceeded`,
`ModelError: ...`, `ReadTimeoutError: ...`); it is fired, never raised, and the method returns
None. No call is retried; every response body is read to its end so the connection goes back to
the pool.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

from sm_locust.errors import UsageError
from sm_locust.invocation import (
    INVOKE_ENDPOINT,
    INVOKE_ENDPOINT_ASYNC,
    INVOKE_ENDPOINT_STREAM,
    Invocation,
    InvocationError,
)
from sm_locust.transport import eventstream
from sm_locust.transport.errors import (
    error_from_response,
    error_from_stream_message,
    network_error,
)
from sm_locust.transport.signing import DEFAULT_SIGNER, BaseSigner, create_signer, host_header
from sm_locust.validation_hook import check_response

TTFT = "TTFT"
INTER_CHUNK = "InterChunk"
INTER_CHUNK_MODES = ("mean", "each", "none")
ENDPOINT_URL_ENV = ("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", "AWS_ENDPOINT_URL")
USER_AGENT = "sm-locust-fast/0.1 geventhttpclient"
INVOKED_VARIANT = "x-amzn-invoked-production-variant"

# headers each operation models (botocore service model); others are not sent
_STREAM_HEADERS = {
    "Content-Type": "Content-Type",
    "Accept": "X-Amzn-SageMaker-Accept",
    "X-Amzn-SageMaker-Custom-Attributes": "X-Amzn-SageMaker-Custom-Attributes",
    "X-Amzn-SageMaker-Target-Variant": "X-Amzn-SageMaker-Target-Variant",
    "X-Amzn-SageMaker-Target-Container-Hostname": "X-Amzn-SageMaker-Target-Container-Hostname",
    "X-Amzn-SageMaker-Inference-Id": "X-Amzn-SageMaker-Inference-Id",
    "X-Amzn-SageMaker-Inference-Component": "X-Amzn-SageMaker-Inference-Component",
    "X-Amzn-SageMaker-Session-Id": "X-Amzn-SageMaker-Session-Id",
}
_ASYNC_HEADERS = {
    "Content-Type": "X-Amzn-SageMaker-Content-Type",
    "Accept": "X-Amzn-SageMaker-Accept",
    "X-Amzn-SageMaker-Custom-Attributes": "X-Amzn-SageMaker-Custom-Attributes",
    "X-Amzn-SageMaker-Inference-Id": "X-Amzn-SageMaker-Inference-Id",
}


@dataclass
class Response:
    """A successful response: status, lower-cased headers, the whole body."""

    status: int
    headers: dict[str, str]
    body: bytes


@dataclass
class StreamResponse(Response):
    """A completed response stream: `body` is the PayloadPart bytes joined, in order.

    Times are seconds from the start of the call; `gaps` are the times between consecutive
    PayloadParts; `tokens` is set when the client has a `token_counter`.
    """

    chunks: list[bytes] = field(default_factory=list)
    time_to_first_chunk: float | None = None
    gaps: list[float] = field(default_factory=list)
    total_time: float = 0.0
    tokens: int | None = None


@dataclass
class AsyncResponse(Response):
    """An accepted asynchronous invocation (HTTP 202)."""

    inference_id: str | None = None
    output_location: str | None = None
    failure_location: str | None = None


def endpoint_url_for(region: str, endpoint_url: str | None = None) -> str:
    """`endpoint_url`, else `AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME` / `AWS_ENDPOINT_URL`, else AWS."""
    for candidate in (endpoint_url, *(os.environ.get(name) for name in ENDPOINT_URL_ENV)):
        if candidate:
            return candidate.rstrip("/")
    return f"https://runtime.sagemaker.{region}.amazonaws.com"


def _region(region: str | None) -> str:
    if region:
        return region
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        if os.environ.get(name):
            return os.environ[name]
    import botocore.session  # profile / config file, no network

    found = botocore.session.Session().get_config_variable("region")
    if not found:
        raise UsageError("no AWS region: pass region=..., or set AWS_REGION / AWS_DEFAULT_REGION")
    return found


class FastSageMakerClient:
    """InvokeEndpoint, InvokeEndpointWithResponseStream and InvokeEndpointAsync, signed, pooled.

    :param endpoint_name: the SageMaker endpoint (quoted in the path as botocore does)
    :param region: signing region and default host; defaults to AWS_REGION / the profile's
    :param endpoint_url: base URL override (e.g. `http://127.0.0.1:8080` for a local endpoint);
        defaults to `AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME`, then the regional AWS host
    :param environment: the Locust Environment whose `events.request` gets every call
    :param concurrency: connections in the keep-alive pool (size it to the users sharing it)
    :param connection_timeout: seconds to open a connection (ConnectTimeoutError)
    :param network_timeout: seconds of silence tolerated on a socket (ReadTimeoutError)
    :param signer: `lean` (default), `botocore`, `crt`, or a `BaseSigner` instance
    :param credentials: botocore credentials object; None = botocore's provider chain
    :param token_counter: `f(stream body bytes) -> int` for streams (see `tokens.py`)
    :param inter_chunk: `mean` (one InterChunk entry per stream), `each` (one per gap), `none`
    :param insecure: geventhttpclient's `insecure`: no TLS host name check
    :param ca_bundle: CA certificates file for TLS; defaults to AWS_CA_BUNDLE (as botocore),
        then certifi's bundle
    :param ssl_context_factory: geventhttpclient's, to build the TLS context yourself
    :param user: the Locust User owning the client (kept for listeners, like FastHttpSession)
    """

    validator: Any = None
    """Optional response check (sm_locust.validation_hook) for `invoke`; None = off."""

    def __init__(
        self,
        endpoint_name: str,
        *,
        environment: Any,
        region: str | None = None,
        endpoint_url: str | None = None,
        concurrency: int = 10,
        connection_timeout: float = 60.0,
        network_timeout: float = 60.0,
        signer: str | BaseSigner = DEFAULT_SIGNER,
        credentials: Any = None,
        token_counter: Callable[[bytes], int] | None = None,
        inter_chunk: str = "mean",
        insecure: bool = False,
        ca_bundle: str | None = None,
        ssl_context_factory: Callable | None = None,
        user: Any = None,
    ):
        if not endpoint_name:
            raise UsageError("FastSageMakerClient needs an endpoint name")
        if inter_chunk not in INTER_CHUNK_MODES:
            raise UsageError(
                f"inter_chunk {inter_chunk!r} is not one of {', '.join(INTER_CHUNK_MODES)}"
            )
        if environment is None:
            raise UsageError("FastSageMakerClient needs the Locust environment (for its events)")
        from geventhttpclient import HTTPClient

        self.endpoint_name = endpoint_name
        self.region = _region(region)
        self.base_url = endpoint_url_for(self.region, endpoint_url)
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"endpoint URL {self.base_url!r} is not an http(s)://host[:port] URL")
        self.environment = environment
        self.request_event = environment.events.request
        self.user = user
        self.signer = create_signer(signer, self.region, credentials)
        self.token_counter = token_counter
        self.inter_chunk = inter_chunk
        self._prefix = parts.path.rstrip("/")
        self._host = host_header(self.base_url)
        quoted = quote(endpoint_name, safe="-_.~")
        base = f"{self._prefix}/endpoints/{quoted}"
        self.paths = {
            INVOKE_ENDPOINT: f"{base}/invocations",
            INVOKE_ENDPOINT_STREAM: f"{base}/invocations-response-stream",
            INVOKE_ENDPOINT_ASYNC: f"{base}/async-invocations",
        }
        https = parts.scheme == "https"
        ca_bundle = ca_bundle or os.environ.get("AWS_CA_BUNDLE") or None
        self._http = HTTPClient(
            parts.hostname,
            port=parts.port,
            headers={"User-Agent": USER_AGENT},
            concurrency=concurrency,
            connection_timeout=connection_timeout,
            network_timeout=network_timeout,
            ssl=https,
            ssl_options={"ca_certs": ca_bundle} if https and ca_bundle else None,
            ssl_context_factory=ssl_context_factory,
            insecure=insecure,
        )
        self._host_is_implied = self._host == _gevent_host(self._http.host, self._http.port)

    # ---------------------------------------------------------------- public calls

    def invoke(
        self,
        invocation: Invocation,
        name: str | None = None,
        *,
        context: dict | None = None,
        started: float | None = None,
    ) -> Response | None:
        """InvokeEndpoint; returns the response, or None after reporting the failure."""
        return self.send(invocation, name, context=context, started=started)[0]

    def send(
        self,
        invocation: Invocation,
        name: str | None = None,
        *,
        context: dict | None = None,
        started: float | None = None,
    ) -> tuple[Response | None, InvocationError | None]:
        """`invoke`, also returning the failure (None on success); fires one event either way.

        With a `validator` set, a response it rejects is the failure (`InvalidResponse: ...`),
        checked after the response time is taken, as the boto3 client does. `started` is the
        `time.perf_counter()` time the response time counts from (default: now), e.g. an
        open-loop sender's intended send time, so waiting to send is charged to the endpoint.
        """
        name = name or invocation.request_name(self.endpoint_name)
        path = self.paths[INVOKE_ENDPOINT]
        start_time, t0 = time.time(), time.perf_counter()
        if started is not None:
            start_time, t0 = start_time - (t0 - started), started
        result: Response | None = None
        length = 0
        try:
            status, headers, body = self._send(path, invocation.http_headers(), invocation.body)
            if status >= 300:  # read, but not counted: the boto3 client reports 0 bytes too
                raise error_from_response(status, headers, body)
            length = len(body)
            result = Response(status, headers, body)
            error = None
        except Exception as exc:  # noqa: BLE001 - every failure becomes an event
            error = network_error(exc, self.base_url + path)
        end = time.perf_counter()
        variant = result.headers.get(INVOKED_VARIANT) if result is not None else None
        context = {"endpoint": self.endpoint_name, "variant": variant, **(context or {})}
        if result is not None and self.validator is not None:
            error = check_response(
                self.validator, result.body, result.headers.get("content-type"), invocation
            )
            result = None if error is not None else result
        self._fire(INVOKE_ENDPOINT, name, t0, start_time, length, error, path, context, end)
        return result, error

    def invoke_async(
        self,
        invocation: Invocation,
        input_location: str | None = None,
        name: str | None = None,
        *,
        context: dict | None = None,
    ) -> AsyncResponse | None:
        """InvokeEndpointAsync: the input is at `input_location` (S3 URI) and/or in the body.

        Content type and accept travel as `X-Amzn-SageMaker-Content-Type` / `-Accept`; fields the
        operation does not model (target model/variant, ...) are not sent.
        """
        name = name or invocation.request_name(self.endpoint_name)
        path = self.paths[INVOKE_ENDPOINT_ASYNC]
        headers = _select(invocation.http_headers(), _ASYNC_HEADERS)
        if input_location:
            headers["X-Amzn-SageMaker-InputLocation"] = input_location
        start_time, t0 = time.time(), time.perf_counter()
        result: AsyncResponse | None = None
        length = 0
        try:
            status, rheaders, body = self._send(path, headers, invocation.body)
            if status >= 300:
                raise error_from_response(status, rheaders, body)
            # length stays 0: the result goes to S3 (boto3 does not expose the 202 body's size)
            try:
                inference_id = json.loads(body).get("InferenceId") if body else None
            except (ValueError, AttributeError):
                inference_id = None
            result = AsyncResponse(
                status,
                rheaders,
                body,
                inference_id=inference_id,
                output_location=rheaders.get("x-amzn-sagemaker-outputlocation"),
                failure_location=rheaders.get("x-amzn-sagemaker-failurelocation"),
            )
            error = None
        except Exception as exc:  # noqa: BLE001
            error = network_error(exc, self.base_url + path)
        context = {"endpoint": self.endpoint_name, **(context or {})}
        self._fire(INVOKE_ENDPOINT_ASYNC, name, t0, start_time, length, error, path, context)
        return result

    def invoke_stream(
        self, invocation: Invocation, name: str | None = None, *, context: dict | None = None
    ) -> StreamResponse | None:
        """InvokeEndpointWithResponseStream, timing the first chunk and the gaps between chunks.

        Entries fired (same name): `TTFT` as soon as the first PayloadPart has arrived (time from
        the start of the call), then at the end `InterChunk` (per `inter_chunk`) and
        `InvokeEndpointWithResponseStream` for the whole stream, which carries the failure if
        any: an HTTP error, a mid-stream `ModelStreamError` / `InternalStreamFailure`, or a
        network error. Its context holds `chunks`, `tokens`, `ttft_ms`, `inter_chunk_ms`.
        """
        name = name or invocation.request_name(self.endpoint_name)
        path = self.paths[INVOKE_ENDPOINT_STREAM]
        headers = _select(invocation.http_headers(), _STREAM_HEADERS)
        start_time, t0 = time.time(), time.perf_counter()
        chunks: list[bytes] = []
        arrivals: list[float] = []
        status, rheaders = 0, {}
        context = {"endpoint": self.endpoint_name, **(context or {})}  # TTFT and InterChunk

        def on_chunk(payload: bytes, now: float) -> None:
            chunks.append(payload)
            arrivals.append(now)
            if len(chunks) == 1:
                self._fire(TTFT, name, t0, start_time, len(payload), None, path, context, now)

        try:
            response = self._start(path, headers, invocation.body)
            status, rheaders = response.status_code, _headers(response)
            if status >= 300:
                raise error_from_response(status, rheaders, response.read())
            error = _read_event_stream(response, on_chunk, self.base_url + path)
        except Exception as exc:  # noqa: BLE001
            error = network_error(exc, self.base_url + path)
        length = sum(len(c) for c in chunks)
        end = time.perf_counter()
        gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
        body = b"".join(chunks)
        tokens = self.token_counter(body) if self.token_counter is not None else None
        stats = {
            "chunks": len(chunks),
            "tokens": tokens,
            "ttft_ms": (arrivals[0] - t0) * 1000 if arrivals else None,
            "inter_chunk_ms": [g * 1000 for g in gaps],
        }
        if gaps and self.inter_chunk == "mean":
            mean_ms = sum(gaps) / len(gaps) * 1000
            self._fire_ms(INTER_CHUNK, name, mean_ms, start_time, len(gaps), None, path, context)
        elif gaps and self.inter_chunk == "each":
            for gap in gaps:
                self._fire_ms(INTER_CHUNK, name, gap * 1000, start_time, 1, None, path, context)
        variant = rheaders.get(INVOKED_VARIANT)
        stream_context = {"endpoint": self.endpoint_name, "variant": variant, **(context or {})}
        stream_context.update(stats)
        self._fire(
            INVOKE_ENDPOINT_STREAM, name, t0, start_time, length, error, path, stream_context, end
        )
        if error is not None:
            return None
        return StreamResponse(
            status,
            rheaders,
            body,
            chunks=chunks,
            time_to_first_chunk=arrivals[0] - t0 if arrivals else None,
            gaps=gaps,
            total_time=end - t0,
            tokens=tokens,
        )

    def close(self) -> None:
        """Close the pooled connections."""
        self._http.close()

    # ---------------------------------------------------------------- internals

    def _start(self, path: str, headers: dict[str, str], body: bytes) -> Any:
        signed = self.signer.sign("POST", self.base_url + path, headers, body)
        if self._host_is_implied:  # geventhttpclient writes this very Host header itself
            signed.pop("Host", None)
        return self._http.request("POST", path, body=body, headers=signed)

    def _send(self, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict, bytes]:
        response = self._start(path, headers, body)
        data = response.read()
        return response.status_code, _headers(response), data

    def _fire(self, request_type, name, t0, start_time, length, error, path, context, end=None):
        elapsed_ms = ((end if end is not None else time.perf_counter()) - t0) * 1000
        self._fire_ms(request_type, name, elapsed_ms, start_time, length, error, path, context)

    def _fire_ms(self, request_type, name, elapsed_ms, start_time, length, error, path, context):
        self.request_event.fire(
            request_type=request_type,
            name=name,
            response_time=elapsed_ms,
            response_length=length,
            exception=error,
            context=context if context is not None else {},
            start_time=start_time,
            url=self.base_url + path,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.endpoint_name!r}, endpoint_url={self.base_url!r})"


def _gevent_host(host: str, port: int) -> str:
    """The Host header geventhttpclient's HTTPClient writes when none is given (its own rule)."""
    if ":" in host and host[0] != "[" and host[-1] != "]":
        host = f"[{host}]"
    return host if port in (80, 443) else f"{host}:{port}"


def _select(headers: dict[str, str], allowed: dict[str, str]) -> dict[str, str]:
    return {allowed[k]: v for k, v in headers.items() if k in allowed}


def _headers(response: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in response.items():
        key = key.lower()
        out[key] = f"{out[key]},{value}" if key in out else value
    return out


def _read_event_stream(
    response: Any, on_chunk: Callable[[bytes, float], None], url: str
) -> InvocationError | None:
    """Read an event-stream body frame by frame to its end; the first stream error, if any.

    Each frame is read whole (its length is in the prelude) and timed when its last byte is in,
    then decoded by botocore's `EventStreamBuffer` (which checks both CRCs). PayloadPart payloads
    go to `on_chunk(payload, perf_counter time)`; other events are skipped, as botocore does. After
    an exception message the rest of the body is still read, so the connection stays reusable.
    """
    from botocore.eventstream import EventStreamBuffer, ParserError

    buffer = EventStreamBuffer()
    error: InvocationError | None = None
    while True:
        prelude = response.read(4)
        if len(prelude) < 4:
            if prelude:  # the body ended inside a frame
                return network_error(ConnectionResetError("truncated event stream"), url)
            return error
        frame = prelude + response.read(eventstream.frame_length(prelude) - 4)
        now = time.perf_counter()
        buffer.add_data(frame)
        try:
            messages = list(buffer)
        except ParserError as exc:  # bad CRC or length: nothing after it can be trusted
            response.read()
            return InvocationError(type(exc).__name__, str(exc))
        for message in messages:
            kind = message.headers.get(":message-type")
            if kind == "event":
                # after an error botocore stops yielding; the bytes are still read, not counted
                if error is None and message.headers.get(":event-type") == eventstream.PAYLOAD_PART:
                    on_chunk(message.payload, now)
            elif error is None:
                error = error_from_stream_message(message.headers, message.payload)
