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

    def invoke(self, invocation: Invocation, name: str | None = None) -> dict | None:
        """Call InvokeEndpoint; returns {'body', 'content_type', 'variant'} or None on failure."""
        return self.send(invocation, name)[0]

    def send(self, invocation: Invocation, name: str | None = None) -> tuple[dict | None, InvocationError | None]:
        """`invoke`, also returning the failure (None on success); fires one request event either way."""
        name = name or invocation.request_name(self.endpoint_name)
        kwargs = invocation.boto3_kwargs()
        start_time = time.time()
        started = time.perf_counter()
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
