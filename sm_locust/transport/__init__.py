"""Sending requests to SageMaker Runtime: the transports behind one contract, picked by name.

`create_client(transport, environment, endpoint_name, **settings)` builds a client from the
`TRANSPORTS` registry; an unknown name is an `UnknownNameError` listing the valid ones. Both
transports take the same constructor, return the same results and fire the same Locust entries
with the same names and failure texts; they differ in client CPU per call (docs/transport.md):

- `contract`: `SageMakerClient` (the constructor and the operations, reported once), the results
  (`InvokeResult`, `StreamResult`, `AsyncResult`), the timing/event helper (`Measurement`) and the
  response-validation hook (`check_response`);
- `fast` (default): `FastSageMakerClient`, SigV4-signed geventhttpclient, no boto3 on the request path;
- `boto3`: `Boto3SageMakerClient`, botocore end to end (proxies, every credential source);
- `signing` (SigV4 signers), `errors` (failures named as botocore names them), `eventstream`
  (the AWS event-stream framing), `tokens` (token counters for streams), `options` (`--transport`,
  `--stream`, `--async-input-location`).

Importing this package imports neither boto3 nor geventhttpclient (clients import them when built).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sm_locust.transport.boto3 import Boto3SageMakerClient
from sm_locust.transport.contract import SageMakerClient
from sm_locust.transport.fast import FastSageMakerClient
from sm_locust.util.registry import Registry

if TYPE_CHECKING:
    from locust.env import Environment

TRANSPORTS: Registry[type[SageMakerClient]] = Registry("transport")
TRANSPORTS.add(FastSageMakerClient.transport, FastSageMakerClient)
TRANSPORTS.add(Boto3SageMakerClient.transport, Boto3SageMakerClient)

# = sm_locust.config.options.SageMakerSettings.transport (a test checks)
DEFAULT_TRANSPORT = FastSageMakerClient.transport


def create_client(transport: str, environment: Environment, endpoint_name: str, **settings: Any) -> SageMakerClient:
    """A client of the named transport: `create_client("fast", env, "my-endpoint", region="us-east-1")`.

    `settings` are the contract's keyword arguments (region, endpoint_url, profile, pool_size,
    connect_timeout, read_timeout, credentials, token_counter, inter_chunk) plus the transport's
    own extras (fast: signer, insecure, ca_bundle, ssl_context_factory; boto3: boto3_client).
    """
    if not isinstance(transport, str):
        raise TypeError(f"create_client() takes a transport name first ({' or '.join(TRANSPORTS.names())}), got "
                        f"{type(transport).__name__} {transport!r:.60}")
    return TRANSPORTS.get(transport)(environment, endpoint_name, **settings)


__all__ = ["DEFAULT_TRANSPORT", "TRANSPORTS", "Boto3SageMakerClient", "FastSageMakerClient", "SageMakerClient",
           "create_client"]
