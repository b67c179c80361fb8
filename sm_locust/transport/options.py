"""The transport options: which client sends (`--transport`) and which API is called (`--stream`,
`--async-input-location`).

Both transports fire the same entries with the same names and failure texts, so a run reads the
same whichever is chosen; what differs is the client CPU per call (docs/transport.md, the bench):

- `fast` (default): `sm_locust.transport.adapter.FastClient`, SigV4-signed geventhttpclient;
- `boto3`: `sm_locust.client.SageMakerClient`, the reference implementation (botocore end to end:
  proxies, custom CA bundles, every credential source, exactly what your application runs).

`SageMakerUser` picks the client class from `transport` (class attribute, overridden by
`--transport` / `SM_LOCUST_TRANSPORT`) unless a subclass sets `client_cls` itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sm_locust.errors import UnknownNameError
from sm_locust.options import OptionSpec

FAST = "fast"
BOTO3 = "boto3"
TRANSPORTS = (FAST, BOTO3)
DEFAULT_TRANSPORT = FAST  # = sm_locust.options.SageMakerSettings.transport (a test checks they agree)

OPTIONS: list[OptionSpec] = [
    OptionSpec("--transport", "SM_LOCUST_TRANSPORT", DEFAULT_TRANSPORT,
               "client that sends the requests: fast (signed geventhttpclient, ~10x less client CPU per call) "
               "or boto3 (the reference: botocore end to end); both report the same entries and error names",
               choices=TRANSPORTS),
    OptionSpec("--stream", "SM_LOCUST_STREAM", False,
               "call InvokeEndpointWithResponseStream instead of InvokeEndpoint: entries TTFT, InterChunk and "
               "InvokeEndpointWithResponseStream", bool),
    OptionSpec("--async-input-location", "SM_LOCUST_ASYNC_INPUT_LOCATION", "",
               "call InvokeEndpointAsync for this S3 input URI instead of InvokeEndpoint (times the 202 acceptance, "
               "not the result); the payload's headers are used, its body is not sent"),
]


def client_class(transport: str) -> type:
    """The `SageMakerUser` client class for a transport name."""
    if transport == FAST:
        from sm_locust.transport.adapter import FastClient

        return FastClient
    if transport == BOTO3:
        from sm_locust.client import SageMakerClient

        return SageMakerClient
    raise UnknownNameError("transport", transport, TRANSPORTS)


def operation(client: Any, options: Any) -> Callable:
    """The client method the default locustfile calls per invocation, from the parsed options:
    `invoke_stream` with `--stream` (it wins over `--async-input-location`), `invoke_async` with
    `--async-input-location`, else `invoke`."""
    stream = bool(getattr(options, "stream", False))
    location = getattr(options, "async_input_location", "") or ""
    if stream:
        return client.invoke_stream
    if location:
        return lambda invocation, name=None: client.invoke_async(invocation, location, name)
    return client.invoke
