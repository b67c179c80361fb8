"""`SageMakerUser`: the one public Locust User for SageMaker endpoints, a thin shell over a client.

Subclass it and call `self.client.invoke(...)` (or `self.invoke(body)`) in tasks. Settings are typed
class attributes, overridden by the sm-locust options when given. The client comes from
`transport.create_client` (or `client_cls`); one is shared per process and settings, created after
`--processes` forks. A user invokes back to back (`think_time` adds a pause); after a task that
could not reach the endpoint it backs off, 50 ms doubling to 1 s (`sm_locust.users.backoff`).
`FastSageMakerUser` is `SageMakerUser` with `transport = "fast"`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from locust import User
from locust.exception import StopTest

from sm_locust.config.endpoint import SageMakerSettings
from sm_locust.config.options import environment_options
from sm_locust.invocation import Invocation
from sm_locust.transport import DEFAULT_TRANSPORT, TRANSPORTS
from sm_locust.transport.contract import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_POOL_SIZE,
    DEFAULT_READ_TIMEOUT_S,
    InvokeResult,
    SageMakerClient,
)
from sm_locust.users.backoff import Backoff, ConnectionBackoff

# settings whose option value is used only when it differs from the option's default
_DEFAULTED = ("think_time", "connect_timeout", "read_timeout", "transport")


class SageMakerUser(User):
    """Abstract user invoking one SageMaker endpoint; define tasks in a subclass."""

    abstract = True

    endpoint_name: str = ""
    """Endpoint to invoke (required); `--endpoint-name` overrides it."""
    endpoint_url: str = ""
    """Runtime API URL (local endpoint, VPC endpoint); `--endpoint-url` overrides it; empty = Locust's
    `host` (`--host`) if set, else $AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME, else AWS."""
    region: str = ""
    """AWS region; `--region` overrides it; empty = the AWS chain."""
    profile: str = ""
    """AWS profile; `--aws-profile` overrides it; empty = the AWS chain."""
    transport: str = DEFAULT_TRANSPORT
    """`fast` (default) or `boto3` (sm_locust.transport.TRANSPORTS); `--transport` overrides it."""
    pool_size: int = DEFAULT_POOL_SIZE
    """Connections the shared client may keep open (size it to the users of one process)."""
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S
    """Seconds to open a connection (ConnectTimeoutError); `--connect-timeout` overrides it."""
    read_timeout: float = DEFAULT_READ_TIMEOUT_S
    """Seconds of socket silence (ReadTimeoutError, also between stream chunks); `--read-timeout`."""
    think_time: float = 0.0
    """Seconds between calls; 0 = as fast as possible; `--think-time` overrides it."""

    token_counter: Callable[[bytes], int] | None = None
    """Counts tokens in a stream body (sm_locust.transport.tokens); None = not counted."""
    inter_chunk: str = "mean"
    """InterChunk entries per stream: `mean` (one), `each` (one per gap) or `none`."""
    client_options: Mapping[str, Any] = MappingProxyType({})
    """The transport's own extra keyword arguments (fast: `signer`, `insecure`, `ca_bundle`, ...)."""
    client_cls: type[SageMakerClient] | None = None
    """The client class; None = the one `transport` names (a subclass may set its own)."""

    def __init__(self, environment):
        super().__init__(environment)
        self.settings = self._settings()
        self.client: SageMakerClient = self._shared_client()
        """The client this user calls (shared with the process's other users of the same settings)."""
        self.backoff = Backoff()
        """This user's back-off after connection errors (its current delay in `backoff.delay_s`)."""
        self._connection_backoff = ConnectionBackoff.for_environment(environment)
        self._think = self.wait_time  # the class's wait_time, whichever subclass set it
        # Locust calls the instance's wait_time: this one wraps whatever the class set
        self.wait_time = self._wait_or_back_off  # type: ignore[method-assign]

    def wait_time(self) -> float:
        return self.settings.think_time

    def _wait_or_back_off(self) -> float:
        """Locust's wait between tasks: the think time, or the back-off after a connection error if longer."""
        think = self._think()
        back_off = self._connection_backoff.after_task(self.backoff)
        return back_off if back_off > think else think

    def _settings(self) -> SageMakerSettings:
        from_class = SageMakerSettings(
            endpoint_name=self.endpoint_name, endpoint_url=self.endpoint_url, region=self.region,
            aws_profile=self.profile, think_time=self.think_time, connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout, transport=self.transport,
        )
        if self.environment.parsed_options is not None:  # the options win where given (not their defaults)
            from_options = SageMakerSettings.from_options(environment_options(self.environment))
            given = {name: value for name, value in vars(from_options).items() if value not in ("", None)
                     and not (name in _DEFAULTED and value == getattr(SageMakerSettings, name))}
            from_class = dataclasses.replace(from_class, **given)
        if not from_class.endpoint_url and self.host:
            from_class = dataclasses.replace(from_class, endpoint_url=self.host)
        return from_class

    def _shared_client(self) -> SageMakerClient:
        s = self.settings
        if not s.endpoint_name:
            raise StopTest(f"{type(self).__name__} has no endpoint name: set the endpoint_name class attribute "
                           "or pass --endpoint-name")
        client_cls = self.client_cls or TRANSPORTS.get(s.transport)
        token_counter = _unbound(type(self), "token_counter")  # a plain function would come back bound
        key = (client_cls, s.endpoint_name, s.endpoint_url, s.region, s.aws_profile, self.pool_size, s.connect_timeout,
               s.read_timeout, token_counter, self.inter_chunk, id(self.client_options))
        cache = self.environment.__dict__.setdefault("_sm_locust_clients", {})
        client = cache.get(key)
        if client is None:
            client = cache[key] = client_cls(
                self.environment, s.endpoint_name, region=s.region or None, endpoint_url=s.endpoint_url or None,
                profile=s.aws_profile or None, pool_size=self.pool_size, connect_timeout=s.connect_timeout,
                read_timeout=s.read_timeout, token_counter=token_counter, inter_chunk=self.inter_chunk,
                **self.client_options,
            )
        return client

    def invoke(self, body: bytes | str | Invocation, **fields) -> InvokeResult | None:
        """Invoke with a body (or a prepared Invocation); failures are reported, not raised."""
        if not isinstance(body, Invocation):
            body = Invocation(body=body.encode() if isinstance(body, str) else body, **fields)
        return self.client.invoke(body)


class FastSageMakerUser(SageMakerUser):
    """`SageMakerUser` with `transport = "fast"` (kept for locustfiles written against it).

    Same attributes and defaults as `SageMakerUser`; the old names map as `concurrency` ->
    `pool_size`, `connection_timeout` -> `connect_timeout`, `network_timeout` -> `read_timeout`,
    `signer` / `credentials` / `insecure` -> `client_options`; the client is shared per process.
    """

    abstract = True
    transport = "fast"


def _unbound(cls: type, attribute: str) -> Any:
    for klass in cls.__mro__:
        if attribute in klass.__dict__:
            value = klass.__dict__[attribute]
            return value.__func__ if isinstance(value, staticmethod) else value
    return None
