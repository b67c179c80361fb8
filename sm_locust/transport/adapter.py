"""`FastClient`: the fast transport behind the boto3 `SageMakerClient`'s constructor and results.

Why: `SageMakerUser` (and so the default locustfile, fan-out and response validation) builds its
client as `client_cls(environment, endpoint_name, region=, endpoint_url=, profile=, pool_size=,
connect_timeout=, read_timeout=)` and reads plain dicts back. `FastClient` takes exactly those
arguments, wraps a `FastSageMakerClient`, and returns the same result shapes as
`sm_locust.client.SageMakerClient`, so `--transport fast|boto3` changes nothing but the cost per
call. Both clients fire the same Locust entries with the same names and failure texts (tests).

Results shared by both transports (None after a reported failure):

| method | returns |
|---|---|
| `invoke(invocation, name=None)` | `{"body", "content_type", "variant"}` |
| `send(invocation, name=None)` | `(that dict or None, InvocationError or None)` (fan-out uses it) |
| `invoke_stream(invocation, name=None)` | `{"body", "content_type", "variant", "chunks", "ttft_ms", "inter_chunk_ms", "tokens"}` |
| `invoke_async(invocation, input_location, name=None)` | `{"inference_id", "output_location", "failure_location"}` |

`invoke_async` sends no body, as boto3's `invoke_endpoint_async` cannot: the input is the S3 object
at `input_location`. `validator` (sm_locust.validation_hook) checks `invoke`/`send` responses.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sm_locust.client import DEFAULT_CONNECT_TIMEOUT_S, DEFAULT_POOL_SIZE, DEFAULT_READ_TIMEOUT_S, LOCAL_DEFAULT_REGION
from sm_locust.invocation import Invocation, InvocationError
from sm_locust.transport.client import FastSageMakerClient
from sm_locust.transport.signing import DEFAULT_SIGNER

STREAM_CONTENT_TYPE = "x-amzn-sagemaker-content-type"


def _profile_session(profile: str | None):
    if not profile:
        return None
    import botocore.session

    return botocore.session.Session(profile=profile)


def _default_session():
    import botocore.session

    return botocore.session.Session()


class FastClient:
    """`SageMakerClient`'s constructor and result shapes over `FastSageMakerClient`."""

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
        signer: str = DEFAULT_SIGNER,
        credentials: Any = None,
        token_counter: Any = None,
        inter_chunk: str = "mean",
    ):
        # resolved now, as boto3 resolves them when its client is made: not inside the first timed call
        session = _profile_session(profile) or _default_session()
        credentials = credentials or session.get_credentials()  # None: every call fails NoCredentialsError
        if profile:
            region = region or session.get_config_variable("region")
        if not region and endpoint_url:
            import os

            if not (os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")):
                region = LOCAL_DEFAULT_REGION  # as the boto3 client: a local endpoint does not care
        self.fast = FastSageMakerClient(
            endpoint_name, environment=environment, region=region, endpoint_url=endpoint_url,
            concurrency=pool_size, connection_timeout=connect_timeout, network_timeout=read_timeout,
            signer=signer, credentials=credentials, token_counter=token_counter, inter_chunk=inter_chunk,
        )
        self.environment = environment
        self.endpoint_name = endpoint_name

    @property
    def validator(self) -> Any:
        """Optional response check (sm_locust.validation_hook); a response it rejects is a failure."""
        return self.fast.validator

    @validator.setter
    def validator(self, value: Any) -> None:
        self.fast.validator = value

    def invoke(self, invocation: Invocation, name: str | None = None, *, started: float | None = None) -> dict | None:
        """Call InvokeEndpoint; returns {'body', 'content_type', 'variant'} or None on failure."""
        return self.send(invocation, name, started=started)[0]

    def send(self, invocation: Invocation, name: str | None = None, *,
             started: float | None = None) -> tuple[dict | None, InvocationError | None]:
        """`invoke`, also returning the failure (None on success); fires one request event either way.

        `started`: the `time.perf_counter()` time the response time counts from (default: now), e.g.
        an open-loop sender's intended send time (the boto3 client has no such argument).
        """
        response, error = self.fast.send(invocation, name, started=started)
        if response is None:
            return None, error
        headers = response.headers
        return {"body": response.body, "content_type": headers.get("content-type"),
                "variant": headers.get("x-amzn-invoked-production-variant")}, None

    def invoke_stream(self, invocation: Invocation, name: str | None = None) -> dict | None:
        """Call InvokeEndpointWithResponseStream (TTFT, InterChunk and stream entries)."""
        response = self.fast.invoke_stream(invocation, name)
        if response is None:
            return None
        return {
            "body": response.body,
            "content_type": response.headers.get(STREAM_CONTENT_TYPE),
            "variant": response.headers.get("x-amzn-invoked-production-variant"),
            "chunks": response.chunks,
            "ttft_ms": response.time_to_first_chunk * 1000 if response.time_to_first_chunk is not None else None,
            "inter_chunk_ms": [gap * 1000 for gap in response.gaps],
            "tokens": response.tokens,
        }

    def invoke_async(self, invocation: Invocation, input_location: str | None = None,
                     name: str | None = None) -> dict | None:
        """Call InvokeEndpointAsync for the S3 input at `input_location` (the body is not sent)."""
        bodyless = dataclasses.replace(invocation, body=b"") if invocation.body else invocation
        response = self.fast.invoke_async(bodyless, input_location, name or invocation.request_name(self.endpoint_name))
        if response is None:
            return None
        return {"inference_id": response.inference_id, "output_location": response.output_location,
                "failure_location": response.failure_location}

    def close(self) -> None:
        self.fast.close()

    def __repr__(self) -> str:
        return f"FastClient({self.endpoint_name!r}, endpoint_url={self.fast.base_url!r})"
