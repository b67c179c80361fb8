"""The transport options: which client sends (`--transport`) and which API is called (`--stream`,
`--async-input-location`).

Both transports fire the same entries with the same names and failure texts, so a run reads the
same whichever is chosen; what differs is the client CPU per call (docs/transport.md, the bench).
The names are those of the `sm_locust.transport.TRANSPORTS` registry (`fast`, the default;
`boto3`); `SageMakerUser` builds its client from `transport` (class attribute, overridden by
`--transport` / `SM_LOCUST_TRANSPORT`) unless a subclass sets `client_cls` itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sm_locust.config.options import Options, OptionSpec
from sm_locust.transport import DEFAULT_TRANSPORT, TRANSPORTS

OPTIONS: list[OptionSpec] = [
    OptionSpec("--transport", "SM_LOCUST_TRANSPORT", DEFAULT_TRANSPORT,
               "client that sends the requests: fast (signed geventhttpclient, ~10x less client CPU per call) "
               "or boto3 (the reference: botocore end to end); both report the same entries and error names",
               choices=tuple(TRANSPORTS)),
    OptionSpec("--stream", "SM_LOCUST_STREAM", False,
               "call InvokeEndpointWithResponseStream instead of InvokeEndpoint: entries TTFT, InterChunk and "
               "InvokeEndpointWithResponseStream", bool),
    OptionSpec("--async-input-location", "SM_LOCUST_ASYNC_INPUT_LOCATION", "",
               "call InvokeEndpointAsync for this S3 input URI instead of InvokeEndpoint (times the 202 acceptance, "
               "not the result); the payload's headers are used, its body is not sent"),
]


def operation(client: Any, options: Options) -> Callable:
    """The client method the default locustfile calls per invocation, from the parsed options:
    `invoke_stream` with `--stream` (it wins over `--async-input-location`), `invoke_async` with
    `--async-input-location`, else `invoke`."""
    location = options.async_input_location
    if options.stream:
        return client.invoke_stream
    if location:
        return lambda invocation, name=None: client.invoke_async(invocation, location, name)
    return client.invoke
