"""`FastSageMakerUser`: an abstract Locust User whose `self.client` is a `FastSageMakerClient`.

A thin shell, like `locust.contrib.fasthttp.FastHttpUser`: settings are class attributes, the
client reports every call through `environment.events.request` with the same request types,
names and error codes as the boto3 `SageMakerUser`. Subclass it and write the tasks::

    class Ranker(FastSageMakerUser):
        endpoint_name = "my-endpoint"
        region = "us-east-1"

        @task
        def rank(self):
            self.client.invoke(Invocation(body=b'{"inputs": [1, 2]}'))

`host` (`--host`), when set, is used as `endpoint_url`, so a local endpoint needs no code change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from locust import User
from locust.exception import StopTest

from sm_locust.transport.client import FastSageMakerClient
from sm_locust.transport.signing import DEFAULT_SIGNER


class FastSageMakerUser(User):
    """Abstract User over the fast signed transport; define tasks in a subclass."""

    abstract = True
    """Not a runnable User on its own."""

    client_cls: type[FastSageMakerClient] = FastSageMakerClient
    """The client class; swap it in a subclass (e.g. to wrap or fake the transport)."""

    endpoint_name: str | None = None
    """The SageMaker endpoint to invoke (required)."""

    region: str | None = None
    """Signing region and default host; None: AWS_REGION / AWS_DEFAULT_REGION / the profile."""

    endpoint_url: str | None = None
    """Base URL; None: `host` (--host), else AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME, else AWS."""

    concurrency: int = 10
    """Connections in this user's keep-alive pool."""

    connection_timeout: float = 60.0
    """Seconds to open a connection before ConnectTimeoutError."""

    network_timeout: float = 60.0
    """Seconds of socket silence before ReadTimeoutError (between stream chunks too)."""

    signer: str = DEFAULT_SIGNER
    """SigV4 signer: `lean` (default, fastest), `botocore` or `crt`."""

    credentials: Any = None
    """botocore credentials object; None: botocore's default provider chain."""

    token_counter: Callable[[bytes], int] | None = None
    """Counts tokens in a stream body (see sm_locust.transport.tokens); None: not counted."""

    inter_chunk: str = "mean"
    """InterChunk entries per stream: `mean` (one), `each` (one per gap) or `none`."""

    insecure: bool = False
    """No TLS host name check (geventhttpclient's `insecure`)."""

    def __init__(self, environment) -> None:
        super().__init__(environment)
        if not self.endpoint_name:
            raise StopTest(
                f"{type(self).__name__} has no endpoint_name: set the `endpoint_name` class "
                "attribute to the SageMaker endpoint to invoke."
            )
        # a plain function set as class attribute would come back bound: read it unbound
        token_counter = _unbound(type(self), "token_counter")
        self.client: FastSageMakerClient = self.client_cls(
            self.endpoint_name,
            environment=self.environment,
            region=self.region,
            endpoint_url=self.endpoint_url or self.host or None,
            concurrency=self.concurrency,
            connection_timeout=self.connection_timeout,
            network_timeout=self.network_timeout,
            signer=self.signer,
            credentials=self.credentials,
            token_counter=token_counter,
            inter_chunk=self.inter_chunk,
            insecure=self.insecure,
            user=self,
        )
        """The FastSageMakerClient this user calls."""


def _unbound(cls: type, attribute: str) -> Any:
    for klass in cls.__mro__:
        if attribute in klass.__dict__:
            value = klass.__dict__[attribute]
            return value.__func__ if isinstance(value, staticmethod) else value
    return None
