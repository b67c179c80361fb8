"""`FastSageMakerClient` (transport `fast`): SageMaker Runtime over geventhttpclient, SigV4-signed, no boto3.

One client owns one keep-alive connection pool to the runtime host and implements the primitives of
`sm_locust.transport.contract` for InvokeEndpoint, InvokeEndpointWithResponseStream and
InvokeEndpointAsync (paths and headers: docs/transport.md). The endpoint name is percent-encoded as
botocore does; response times start before signing; failures are named as botocore names them
(`transport.errors`). **One request, sent once**: the request is written here (head built once per
shape, `_head`), head and body in one write, never re-sent, so a broken or closed connection is the
call's one failure (`ConnectionClosedError`). Every body is read to its end.
"""

from __future__ import annotations

import errno
import json
import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from sm_locust.aws.clients import chain_credentials, runtime_region
from sm_locust.aws.region import endpoint_url_for
from sm_locust.errors import UsageError
from sm_locust.invocation import (
    INVOKE_ENDPOINT,
    INVOKE_ENDPOINT_ASYNC,
    INVOKE_ENDPOINT_STREAM,
    MODEL_WAIT_HEADER,
    Invocation,
    InvocationError,
)
from sm_locust.transport import eventstream
from sm_locust.transport.arrival import arrival_clock
from sm_locust.transport.contract import (
    AsyncResult,
    InvokeResult,
    SageMakerClient,
    StreamMeasurement,
    wait_ms,
)
from sm_locust.transport.errors import error_from_response, error_from_stream_message, network_error
from sm_locust.transport.signing import DEFAULT_SIGNER, BaseSigner, LeanSigner, SigningTemplate, create_signer

if TYPE_CHECKING:
    from locust.env import Environment

    from geventhttpclient.response import HTTPSocketPoolResponse

USER_AGENT = "sm-locust-fast/0.1 geventhttpclient"
INVOKED_VARIANT = "x-amzn-invoked-production-variant"
MODEL_WAIT = MODEL_WAIT_HEADER.lower()
STREAM_CONTENT_TYPE = "x-amzn-sagemaker-content-type"
HEAD_ENTRIES = 256  # request heads remembered, one per request shape (= the lean signer's templates)

# RFC 9110 (geventhttpclient 2.6's own checks): a header name is a token, a value has no CR/LF/NUL
_TOKEN = re.compile(r"\A[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_FIELD_VALUE = re.compile(r"\A[\t\x20-\x7e\x80-\xff]*\Z")
_RESEND_ERRNOS = (errno.ECONNRESET, errno.EPIPE)

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


def _region(region: str | None, profile: str | None, endpoint_url: str | None) -> str:
    """The AWS client factory's runtime region (`region`, AWS_REGION / AWS_DEFAULT_REGION, the profile's,
    else us-east-1 for a local endpoint), or a UsageError."""
    found = runtime_region(region, profile, endpoint_url)
    if found:
        return found
    raise UsageError("no AWS region: pass region=..., or set AWS_REGION / AWS_DEFAULT_REGION")


class FastSageMakerClient(SageMakerClient):
    """The `fast` transport: the contract's constructor (`SageMakerClient`), plus its own extras.

    :param signer: `lean` (default), `botocore`, `crt`, or a `BaseSigner` instance
    :param insecure: geventhttpclient's `insecure`: no TLS host name check
    :param ca_bundle: CA certificates file for TLS; defaults to AWS_CA_BUNDLE (as botocore),
        then certifi's bundle
    :param ssl_context_factory: geventhttpclient's, to build the TLS context yourself
    """

    transport = "fast"

    def __init__(
        self,
        environment: Environment,
        endpoint_name: str,
        *,
        signer: str | BaseSigner = DEFAULT_SIGNER,
        insecure: bool = False,
        ca_bundle: str | None = None,
        ssl_context_factory: Callable | None = None,
        **contract: Any,
    ):
        super().__init__(environment, endpoint_name, **contract)
        # lazy: botocore and geventhttpclient load after Locust has patched gevent (this module is imported
        # before, by preflight in the parent); botocore also costs ~190 ms (measured)
        from geventhttpclient import HTTPClient
        from geventhttpclient.response import HTTPSocketPoolResponse

        settings = self.settings
        # resolved now, as boto3 resolves them when its client is made: not inside the first timed call;
        # None: every call fails NoCredentialsError (the run's preflight gives a local endpoint placeholders)
        credentials = settings.credentials or chain_credentials(settings.profile)
        self.region = _region(settings.region, settings.profile, settings.endpoint_url)
        self.base_url = endpoint_url_for(self.region, settings.endpoint_url)
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"endpoint URL {self.base_url!r} is not an http(s)://host[:port] URL")
        self.signer = create_signer(signer, self.region, credentials)
        # the lean signer's templates let the request head be kept
        self._lean = self.signer if isinstance(self.signer, LeanSigner) else None
        self._heads: dict[SigningTemplate, str] = {}
        base = f"{parts.path.rstrip('/')}/endpoints/{quote(endpoint_name, safe='-_.~')}"
        self.paths = {
            INVOKE_ENDPOINT: f"{base}/invocations",
            INVOKE_ENDPOINT_STREAM: f"{base}/invocations-response-stream",
            INVOKE_ENDPOINT_ASYNC: f"{base}/async-invocations",
        }
        self._urls = {operation: self.base_url + path for operation, path in self.paths.items()}
        self.urls.update(self._urls)
        self._invoke_path = self.paths[INVOKE_ENDPOINT]
        self._invoke_url = self._urls[INVOKE_ENDPOINT]
        https = parts.scheme == "https"
        ca_bundle = ca_bundle or os.environ.get("AWS_CA_BUNDLE") or None
        self._http = HTTPClient(
            parts.hostname,
            port=parts.port,
            concurrency=settings.pool_size,
            connection_timeout=settings.connect_timeout,
            network_timeout=settings.read_timeout,
            ssl=https,
            ssl_options={"ca_certs": ca_bundle} if https and ca_bundle else None,
            ssl_context_factory=ssl_context_factory,
            insecure=insecure,
        )
        # the client builds the pool (plain or TLS); requests are written by `_send`, one attempt each
        self._pool = self._http._connection_pool
        self._response_cls = HTTPSocketPoolResponse
        self._block_size = self._http.block_size
        self._headers_type = self._http.headers_type

    # ---------------------------------------------------------------- the contract's primitives

    def _invoke(self, invocation: Invocation) -> InvokeResult:
        body = invocation.body
        response = self._send(self._head(self._invoke_path, self._invoke_url, invocation.http_headers(), body), body)
        data = response.read()
        status = response.status_code
        if status >= 300:  # read, but not counted: the boto3 client reports 0 bytes too
            raise error_from_response(status, _headers(response), data)
        return InvokeResult(data, _header(response, "content-type"), _header(response, INVOKED_VARIANT),
                            wait_ms(_header(response, MODEL_WAIT)))

    def _stream(self, invocation: Invocation, stream: StreamMeasurement) -> None:
        headers = _select(invocation.http_headers(), _STREAM_HEADERS)
        response = self._start(INVOKE_ENDPOINT_STREAM, headers, invocation.body)
        headers = _headers(response)
        if response.status_code >= 300:
            raise error_from_response(response.status_code, headers, response.read())
        stream.opened(headers.get(STREAM_CONTENT_TYPE), headers.get(INVOKED_VARIANT), wait_ms(headers.get(MODEL_WAIT)))
        error = read_event_stream(response, stream.chunk, self._urls[INVOKE_ENDPOINT_STREAM])
        if error is not None:  # the body has been read to its end: the connection is clean
            raise error

    def _async(self, invocation: Invocation, input_location: str | None) -> AsyncResult:
        headers = _select(invocation.http_headers(), _ASYNC_HEADERS)
        if input_location:
            headers["X-Amzn-SageMaker-InputLocation"] = input_location
        response = self._start(INVOKE_ENDPOINT_ASYNC, headers, b"")  # the input is the S3 object
        body = response.read()
        rheaders = _headers(response)
        if response.status_code >= 300:
            raise error_from_response(response.status_code, rheaders, body)
        try:
            inference_id = json.loads(body).get("InferenceId") if body else None
        except (ValueError, AttributeError):
            inference_id = None
        return AsyncResult(inference_id, rheaders.get("x-amzn-sagemaker-outputlocation"),
                           rheaders.get("x-amzn-sagemaker-failurelocation"))

    def error(self, exc: BaseException, url: str | None = None) -> InvocationError:
        return network_error(exc, url or self._invoke_url)

    def close(self) -> None:
        """Close the pooled connections."""
        self._http.close()

    # ---------------------------------------------------------------- internals

    def _start(self, operation: str, headers: dict[str, str], body: bytes) -> HTTPSocketPoolResponse:
        return self._send(self._head(self.paths[operation], self._urls[operation], headers, body), body)

    def _head(self, path: str, url: str, headers: dict[str, str], body: bytes) -> bytes:
        """The signed request head: request line, headers, `Content-Length`, blank line (latin-1, as
        geventhttpclient encodes it). With the lean signer everything but the date and signature is
        written once per request shape; another signer's headers are written out every time."""
        if self._lean is not None:
            template, amz_date, authorization = self._lean.sign_parts("POST", url, headers, body)
            head = self._heads.get(template)
            if head is None:
                head = self._head_start(path, template.headers)
                if len(self._heads) >= HEAD_ENTRIES:
                    self._heads.clear()
                self._heads[template] = head
            return (f"{head}X-Amz-Date: {amz_date}\r\nAuthorization: {authorization}\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n").encode("latin-1")
        signed = self.signer.sign("POST", url, headers, body)
        return f"{self._head_start(path, signed)}Content-Length: {len(body)}\r\n\r\n".encode("latin-1")

    def _head_start(self, path: str, headers: dict[str, str]) -> str:
        """Request line and header lines (the signed `Host` included), each name and value checked as
        geventhttpclient checks them (no CR/LF smuggled in through a custom attribute)."""
        lines = [f"POST {path} HTTP/1.1\r\n"]
        if not any(name.lower() == "user-agent" for name in headers):
            lines.append(f"User-Agent: {USER_AGENT}\r\n")
        for name, value in headers.items():
            value = str(value)
            if not _TOKEN.fullmatch(name):
                raise ValueError(f"invalid header field name {name!r}")
            if not _FIELD_VALUE.fullmatch(value):
                raise ValueError(f"invalid value for header field {name!r}: {value!r}")
            lines.append(f"{name}: {value}\r\n")
        return "".join(lines)

    def _send(self, head: bytes, body: bytes) -> HTTPSocketPoolResponse:
        """Send one request on a pooled connection and read the answer's head; never re-sent.

        A connection that breaks while sending may still carry the server's early answer (a 413 for
        a large body, say): it is read. Otherwise the broken or closed connection is the failure.
        """
        pool = self._pool
        sock = pool.get_socket()
        try:
            # one write: a separate small write stalls on Nagle (the pool does not set TCP_NODELAY)
            sock.sendall(head + (body if type(body) is bytes else bytes(body)))
        except OSError as exc:
            if exc.errno not in _RESEND_ERRNOS:
                pool.release_socket(sock)
                raise
            # the answer, if the server sent one before closing; else the error raised from there
        except BaseException:  # the User is being stopped: the connection's state is unknown
            pool.release_socket(sock)
            raise
        # the response returns the connection to the pool (or closes it) when it is read or fails
        return self._response_cls(sock, pool, block_size=self._block_size, method="POST",
                                  headers_type=self._headers_type)


def _select(headers: dict[str, str], allowed: dict[str, str]) -> dict[str, str]:
    return {allowed[k]: v for k, v in headers.items() if k in allowed}


def _header(response: HTTPSocketPoolResponse, name: str) -> str | None:
    """One response header (lower-case `name`), repeated values joined by commas as `_headers` does."""
    value = response.get(name)
    return ",".join(value) if isinstance(value, list) else value


def _headers(response: HTTPSocketPoolResponse) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in response.items():
        key = key.lower()
        out[key] = f"{out[key]},{value}" if key in out else value
    return out


def read_event_stream(
    response: HTTPSocketPoolResponse, on_chunk: Callable[[bytes, float], None], url: str
) -> InvocationError | None:
    """Read an event-stream body frame by frame to its end; the first stream error, if any.

    Each frame is read whole (its length is in the prelude) and timed when its last byte is in (as of the
    loop's wake-up that read it: `transport.arrival`),
    then decoded by botocore's `EventStreamBuffer` (which checks both CRCs). PayloadPart payloads
    go to `on_chunk(payload, perf_counter time)`; other events are skipped, as botocore does. After
    an exception message the rest of the body is still read, so the connection stays reusable. A frame
    that cannot be one (a length over botocore's own limits, `MAX_FRAME`) or a bad CRC ends the read at
    once and the connection is discarded: a frame claiming 4 GB was read whole, and the bytes after a
    bad CRC were read without end.
    """
    from botocore.eventstream import EventStreamBuffer, ParserError  # lazy: see FastSageMakerClient.__init__

    buffer = EventStreamBuffer()
    error: InvocationError | None = None
    stamp = arrival_clock()  # the loop's wake-up time, not this greenlet's turn (transport/arrival.py)
    now: float | None = None
    while True:
        prelude = response.read(4)
        if len(prelude) < 4:
            if prelude:  # the body ended inside a frame
                return network_error(ConnectionResetError("truncated event stream"), url)
            return error
        length = eventstream.frame_length(prelude)
        if not eventstream.MIN_FRAME <= length <= eventstream.MAX_FRAME:
            _discard(response)
            return InvocationError("InvalidPayloadLength", f"an event-stream frame of {length:,} bytes (at most "
                                   f"{eventstream.MAX_FRAME:,}); the rest of the stream was not read")
        frame = prelude + response.read(length - 4)
        now = stamp(now)
        buffer.add_data(frame)
        try:
            # Any: botocore-stubs type EventStreamMessage.headers as an int (it is a dict)
            messages: list[Any] = list(buffer)
        except ParserError as exc:  # bad CRC or length: nothing after it can be trusted, nor read
            _discard(response)
            return InvocationError(type(exc).__name__, str(exc))
        for message in messages:
            kind = message.headers.get(":message-type")
            if kind == "event":
                # after an error botocore stops yielding; the bytes are still read, not counted
                if error is None and message.headers.get(":event-type") == eventstream.PAYLOAD_PART:
                    on_chunk(message.payload, now)
            elif error is None:
                error = error_from_stream_message(message.headers, message.payload)


def _discard(response: HTTPSocketPoolResponse) -> None:
    """Close the response's connection instead of returning it to the pool (its rest is not read)."""
    pool, sock = getattr(response, "_pool", None), getattr(response, "_sock", None)
    try:
        if pool is not None and sock is not None:
            pool.release_socket(sock)
        elif sock is not None:
            sock.close()
    except OSError:
        pass
    finally:
        if sock is not None:
            response._sock = None
            response._pool = None
