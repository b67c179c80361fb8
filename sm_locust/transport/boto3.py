"""`Boto3SageMakerClient` (transport `boto3`): botocore's `sagemaker-runtime` end to end, the reference.

It implements the transport primitives of `sm_locust.transport.contract` with the botocore defaults
that distort them fixed (docs/facts.md): retries really off (`total_max_attempts=1`), the connection
pool sized for the users sharing the client, the body read inside the timed block. Failures are
named by botocore error code (`name_error`). The client comes from `sm_locust.aws.clients`
(purpose RUNTIME), whose rules for region, credentials and endpoint apply.
"""

from __future__ import annotations

from time import perf_counter
from typing import TYPE_CHECKING, Any

from sm_locust.aws.clients import LOCAL_DEFAULT_REGION, AwsClient, Keys, Purpose, client
from sm_locust.invocation import MODEL_WAIT_HEADER, Invocation, InvocationError
from sm_locust.transport.contract import (
    AsyncResult,
    ClientSettings,
    InvokeResult,
    SageMakerClient,
    StreamMeasurement,
    wait_ms,
)

if TYPE_CHECKING:
    from locust.env import Environment

_MODEL_WAIT = MODEL_WAIT_HEADER.lower()
# the members each operation models (botocore's sagemaker-runtime service model)
_STREAM_KWARGS = frozenset({"Body", "ContentType", "Accept", "CustomAttributes", "TargetVariant",
                            "TargetContainerHostname", "InferenceId", "InferenceComponentName", "SessionId"})
_ASYNC_KWARGS = frozenset({"ContentType", "Accept", "CustomAttributes", "InferenceId"})


def make_boto3_client(**settings: Any):
    """A `sagemaker-runtime` client with retries off and a pool sized for its users.

    `settings` are `ClientSettings` fields (region, endpoint_url, profile, pool_size,
    connect_timeout, read_timeout, credentials); `credentials` (a botocore credentials object) is
    used as a static copy of its current keys.
    """
    s = ClientSettings(**settings)
    return client("sagemaker-runtime", Purpose.RUNTIME, region=s.region, profile=s.profile,
                  endpoint_url=s.endpoint_url, default_region=LOCAL_DEFAULT_REGION if s.endpoint_url else None,
                  keys=None if s.credentials is None else Keys.of(s.credentials), when_none="fail",
                  pool_size=s.pool_size, connect_timeout=s.connect_timeout, read_timeout=s.read_timeout)


def name_error(exc: BaseException) -> InvocationError:
    """The botocore error code (or exception class) a failure is counted under."""
    if isinstance(exc, InvocationError):
        return exc
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


class Boto3SageMakerClient(SageMakerClient):
    """The `boto3` transport: the contract's constructor (`SageMakerClient`), plus `boto3_client=` (an injected
    `sagemaker-runtime` client, e.g. one a test or bench built; the settings are then its own)."""

    transport = "boto3"

    def __init__(self, environment: Environment, endpoint_name: str, *, boto3_client: AwsClient = None,
                 **contract: Any):
        super().__init__(environment, endpoint_name, **contract)
        self.runtime = boto3_client or make_boto3_client(**vars(self.settings))

    def _invoke(self, invocation: Invocation) -> InvokeResult:
        response = self.runtime.invoke_endpoint(EndpointName=self.endpoint_name, **invocation.boto3_kwargs())
        headers = response.get("ResponseMetadata", {}).get("HTTPHeaders", {})  # botocore: lower-case names
        return InvokeResult(response["Body"].read(), response.get("ContentType"),
                            response.get("InvokedProductionVariant"), wait_ms(headers.get(_MODEL_WAIT)))

    def _stream(self, invocation: Invocation, stream: StreamMeasurement) -> None:
        kwargs = {k: v for k, v in invocation.boto3_kwargs().items() if k in _STREAM_KWARGS}
        response = self.runtime.invoke_endpoint_with_response_stream(EndpointName=self.endpoint_name, **kwargs)
        headers = response.get("ResponseMetadata", {}).get("HTTPHeaders", {})  # botocore: lower-case names
        stream.opened(response.get("ContentType"), response.get("InvokedProductionVariant"),
                      wait_ms(headers.get(_MODEL_WAIT)))
        body = response["Body"]
        try:
            for event in body:
                part = event.get("PayloadPart")
                if part is not None:
                    stream.chunk(part.get("Bytes", b""), perf_counter())
        finally:
            _drain(body)

    def _async(self, invocation: Invocation, input_location: str | None) -> AsyncResult:
        kwargs = {k: v for k, v in invocation.boto3_kwargs().items() if k in _ASYNC_KWARGS}
        response = self.runtime.invoke_endpoint_async(EndpointName=self.endpoint_name,
                                                      InputLocation=input_location or "", **kwargs)
        return AsyncResult(response.get("InferenceId"), response.get("OutputLocation"), response.get("FailureLocation"))

    def error(self, exc: BaseException, url: str | None = None) -> InvocationError:
        return name_error(exc)

    def close(self) -> None:
        close = getattr(self.runtime, "close", None)
        if close is not None:
            close()

    def __repr__(self) -> str:
        url = getattr(getattr(self.runtime, "meta", None), "endpoint_url", None)
        return f"{type(self).__name__}({self.endpoint_name!r}, endpoint_url={url!r})"


DRAIN_BYTES = 1 << 20
"""What is read of a stream's rest after botocore stopped (an error): a bad frame followed by endless bytes
was read for ever. More than this, and the connection is closed instead of reused."""


def _drain(stream: Any, limit: int = DRAIN_BYTES) -> None:
    """Read what is left of an event stream's body (after an error botocore stops reading), so the
    connection goes back to the pool clean; at most `limit` bytes, else the connection is closed."""
    raw = getattr(stream, "_raw_stream", None)
    try:
        if raw is not None:
            read = 0
            for chunk in raw.stream():
                read += len(chunk)
                if read > limit:
                    stream.close()
                    return
    except Exception:  # a broken connection: urllib3 discards it
        stream.close()
