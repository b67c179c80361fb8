"""`SageMakerClient`: InvokeEndpoint through boto3, measured and reported as Locust events.

The client owns the boto3 `sagemaker-runtime` client and turns every call into exactly one
`request` event. It is built for load tests, so it fixes the botocore defaults that distort them
(REFERENCE.md): retries are really off (`total_max_attempts=1`: a throttle is counted, not hidden
behind a silent retry), the connection pool is sized for the users sharing the client, and the
response body is always read inside the timed block. Failures are reported, never raised, named by
their botocore error code (`ThrottlingException: Rate exceeded`). With a `validator` set, a
response it rejects is reported as `InvalidResponse` (sm_locust/validation_hook.py).

Region, credentials and endpoint follow the boto3 chain (`AWS_PROFILE`, `AWS_REGION`,
`AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME`, ...) unless given explicitly.
"""

from __future__ import annotations

import time
from typing import Any

from sm_locust.invocation import INVOKE_ENDPOINT, Invocation, InvocationError
from sm_locust.validation_hook import check_response

DEFAULT_POOL_SIZE = 1024
DEFAULT_CONNECT_TIMEOUT_S = 5.0
DEFAULT_READ_TIMEOUT_S = 60.0
LOCAL_DEFAULT_REGION = "us-east-1"


def make_boto3_client(
    *,
    region: str | None = None,
    endpoint_url: str | None = None,
    profile: str | None = None,
    pool_size: int = DEFAULT_POOL_SIZE,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
    read_timeout: float = DEFAULT_READ_TIMEOUT_S,
):
    """A `sagemaker-runtime` client with retries off and a pool sized for its users."""
    import boto3
    from botocore.config import Config

    session = boto3.session.Session(profile_name=profile or None)
    if not (region or session.region_name) and endpoint_url:
        region = LOCAL_DEFAULT_REGION  # a local endpoint does not care, botocore still needs one
    config = Config(
        retries={"mode": "standard", "total_max_attempts": 1},
        max_pool_connections=pool_size,
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        tcp_keepalive=True,
    )
    return session.client("sagemaker-runtime", region_name=region or None, endpoint_url=endpoint_url or None, config=config)


def name_error(exc: BaseException) -> InvocationError:
    """The botocore error code (or exception class) a failure is counted under."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict) and "Error" in response:
        err = response.get("Error") or {}
        status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        code = str(err.get("Code") or status or type(exc).__name__)
        message = str(err.get("Message") or "")
        if code == "ModelError" and response.get("OriginalStatusCode"):
            message = f"(original status {response['OriginalStatusCode']}) {message}"
        return InvocationError(code, message, status)
    text = str(exc)
    if type(exc).__module__.startswith("botocore") or type(exc).__module__.startswith("urllib3"):
        return InvocationError(type(exc).__name__, text.split(":", 1)[0] if "endpoint URL" in text else text)
    return InvocationError(type(exc).__name__, text)


class SageMakerClient:
    """Invokes one endpoint and fires one Locust `request` event per call."""

    validator: Any = None
    """Optional response check (sm_locust.validation_hook); a response it rejects is a failure."""

    def __init__(
        self,
        environment,
        endpoint_name: str,
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        profile: str | None = None,
        pool_size: int = DEFAULT_POOL_SIZE,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
        read_timeout: float = DEFAULT_READ_TIMEOUT_S,
        boto3_client: Any = None,
    ):
        self.environment = environment
        self.endpoint_name = endpoint_name
        self.runtime = boto3_client or make_boto3_client(
            region=region, endpoint_url=endpoint_url, profile=profile, pool_size=pool_size,
            connect_timeout=connect_timeout, read_timeout=read_timeout,
        )
        self._request = environment.events.request

    def invoke(self, invocation: Invocation, name: str | None = None, *, started: float | None = None) -> dict | None:
        """Call InvokeEndpoint; returns {'body', 'content_type', 'variant'} or None on failure."""
        return self.send(invocation, name, started=started)[0]

    def send(self, invocation: Invocation, name: str | None = None, *,
             started: float | None = None) -> tuple[dict | None, InvocationError | None]:
        """`invoke`, also returning the failure (None on success); fires one request event either way.

        `started` is the `time.perf_counter()` time the response time counts from (default: now);
        open-loop senders pass the intended send time, so a late send is not hidden.
        """
        name = name or invocation.request_name(self.endpoint_name)
        kwargs = invocation.boto3_kwargs()
        now = time.perf_counter()
        started = now if started is None else started
        start_time = time.time() - (now - started)
        body = b""
        result = None
        exception = None
        try:
            response = self.runtime.invoke_endpoint(EndpointName=self.endpoint_name, **kwargs)
            body = response["Body"].read()
            result = {
                "body": body,
                "content_type": response.get("ContentType"),
                "variant": response.get("InvokedProductionVariant"),
            }
        except Exception as exc:  # reported as a failure event, never raised into the User
            exception = name_error(exc)
        response_time = (time.perf_counter() - started) * 1000.0
        context = {"endpoint": self.endpoint_name, "variant": result and result["variant"]}
        if result is not None and self.validator is not None:
            exception = check_response(self.validator, body, result["content_type"], invocation)
            result = None if exception is not None else result
        self._request.fire(
            request_type=INVOKE_ENDPOINT,
            name=name,
            response_time=response_time,
            response_length=len(body),
            exception=exception,
            context=context,
            start_time=start_time,
            url=None,
        )
        return result, exception

    # -- InvokeEndpointWithResponseStream and InvokeEndpointAsync (same entries as sm_locust.transport) --

    token_counter: Any = None
    """Optional `f(stream body) -> int` (sm_locust.transport.tokens) for `invoke_stream`."""

    def invoke_stream(self, invocation: Invocation, name: str | None = None) -> dict | None:
        """Call InvokeEndpointWithResponseStream, reading its EventStream to the end.

        Fires `TTFT` (call start -> first PayloadPart), `InterChunk` (mean gap, streams of 2+
        chunks) and `InvokeEndpointWithResponseStream` (whole stream, carries the failure: HTTP
        error, mid-stream ModelStreamError / InternalStreamFailure, network error), as
        `FastSageMakerClient.invoke_stream` does. Returns {'body', 'content_type', 'variant',
        'chunks', 'ttft_ms', 'inter_chunk_ms', 'tokens'} or None on failure.
        """
        from sm_locust.invocation import INVOKE_ENDPOINT_STREAM

        name = name or invocation.request_name(self.endpoint_name)
        kwargs = {k: v for k, v in invocation.boto3_kwargs().items() if k in _STREAM_KWARGS}
        start_time = time.time()
        started = time.perf_counter()
        chunks: list[bytes] = []
        arrivals: list[float] = []
        response: dict = {}
        exception = None
        try:
            response = self.runtime.invoke_endpoint_with_response_stream(EndpointName=self.endpoint_name, **kwargs)
            stream = response["Body"]
            try:
                for event in stream:
                    part = event.get("PayloadPart")
                    if part is None:
                        continue
                    now = time.perf_counter()
                    chunks.append(part.get("Bytes", b""))
                    arrivals.append(now)
                    if len(chunks) == 1:
                        self._request.fire(request_type="TTFT", name=name, response_time=(now - started) * 1000.0,
                                           response_length=len(chunks[0]), exception=None,
                                           context={"endpoint": self.endpoint_name}, start_time=start_time, url=None)
            finally:
                _drain(stream)
        except Exception as exc:  # reported as a failure event, never raised into the User
            exception = name_error(exc)
        end = time.perf_counter()
        gaps = [(b - a) * 1000.0 for a, b in zip(arrivals, arrivals[1:])]
        if gaps:
            self._request.fire(request_type="InterChunk", name=name, response_time=sum(gaps) / len(gaps),
                               response_length=len(gaps), exception=None, context={"endpoint": self.endpoint_name},
                               start_time=start_time, url=None)
        body = b"".join(chunks)
        tokens = self.token_counter(body) if self.token_counter is not None and chunks else None
        variant = response.get("InvokedProductionVariant")
        ttft_ms = (arrivals[0] - started) * 1000.0 if arrivals else None
        self._request.fire(
            request_type=INVOKE_ENDPOINT_STREAM, name=name, response_time=(end - started) * 1000.0,
            response_length=len(body), exception=exception,
            context={"endpoint": self.endpoint_name, "variant": variant, "chunks": len(chunks), "tokens": tokens,
                     "ttft_ms": ttft_ms, "inter_chunk_ms": gaps},
            start_time=start_time, url=None,
        )
        if exception is not None:
            return None
        return {"body": body, "content_type": response.get("ContentType"), "variant": variant, "chunks": chunks,
                "ttft_ms": ttft_ms, "inter_chunk_ms": gaps, "tokens": tokens}

    def invoke_async(self, invocation: Invocation, input_location: str | None = None,
                     name: str | None = None) -> dict | None:
        """Call InvokeEndpointAsync for the S3 object at `input_location`; fires one
        `InvokeEndpointAsync` event (the time to be accepted, not to the result). Returns
        {'inference_id', 'output_location', 'failure_location'} or None on failure."""
        from sm_locust.invocation import INVOKE_ENDPOINT_ASYNC

        name = name or invocation.request_name(self.endpoint_name)
        kwargs = {k: v for k, v in invocation.boto3_kwargs().items() if k in _ASYNC_KWARGS}
        start_time = time.time()
        started = time.perf_counter()
        result = None
        exception = None
        try:
            response = self.runtime.invoke_endpoint_async(EndpointName=self.endpoint_name,
                                                          InputLocation=input_location or "", **kwargs)
            result = {"inference_id": response.get("InferenceId"), "output_location": response.get("OutputLocation"),
                      "failure_location": response.get("FailureLocation")}
        except Exception as exc:  # reported as a failure event, never raised into the User
            exception = name_error(exc)
        self._request.fire(request_type=INVOKE_ENDPOINT_ASYNC, name=name,
                           response_time=(time.perf_counter() - started) * 1000.0, response_length=0,
                           exception=exception, context={"endpoint": self.endpoint_name}, start_time=start_time,
                           url=None)
        return result


# the members each operation models (botocore's sagemaker-runtime service model)
_STREAM_KWARGS = frozenset({"Body", "ContentType", "Accept", "CustomAttributes", "TargetVariant",
                            "TargetContainerHostname", "InferenceId", "InferenceComponentName", "SessionId"})
_ASYNC_KWARGS = frozenset({"ContentType", "Accept", "CustomAttributes", "InferenceId"})


def _drain(stream: Any) -> None:
    """Read what is left of an event stream's body (after an error botocore stops reading), so the
    connection goes back to the pool clean."""
    raw = getattr(stream, "_raw_stream", None)
    try:
        if raw is not None:
            for _ in raw.stream():
                pass
    except Exception:  # a broken connection: urllib3 discards it
        stream.close()
