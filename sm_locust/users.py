"""`SageMakerUser`: the abstract Locust User for SageMaker endpoints, a thin shell over a client.

Subclass it in your own locustfile and call `self.client.invoke(...)` (or `self.invoke(body)`) in
your tasks. Settings come from class attributes, overridden by the sm-locust options when those are
given (command line, `SM_LOCUST_*` env vars, locust.conf, web UI). One client (and one connection
pool) is shared by all users of a process, created on first use, i.e. after `--processes` forks.
By default a user invokes as fast as it can, one call after another; `--think-time` adds a pause.
"""

from __future__ import annotations

from locust import User

from sm_locust.client import DEFAULT_CONNECT_TIMEOUT_S, DEFAULT_POOL_SIZE, DEFAULT_READ_TIMEOUT_S
from sm_locust.invocation import Invocation
from sm_locust.options import SageMakerSettings
from sm_locust.transport.options import client_class


class SageMakerUser(User):
    """Abstract user invoking one SageMaker endpoint through `client_cls`."""

    abstract = True

    endpoint_name: str = ""
    """Endpoint to invoke; `--endpoint-name` overrides it."""
    endpoint_url: str = ""
    """Runtime API URL (local endpoint, VPC endpoint); empty = AWS default or $AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME."""
    region: str = ""
    """AWS region; empty = the boto3 chain."""
    aws_profile: str = ""
    """AWS profile; empty = the boto3 chain."""
    think_time: float = 0.0
    """Seconds between calls; 0 = as fast as possible."""
    pool_size: int = DEFAULT_POOL_SIZE
    """Connections the shared client may keep open (size it to the users of one process)."""
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S
    read_timeout: float = DEFAULT_READ_TIMEOUT_S

    transport: str = SageMakerSettings.transport
    """`fast` or `boto3` (sm_locust.transport.options); `--transport` overrides it."""

    client_cls: type | None = None
    """The client class; None = the one `transport` names (a subclass may set its own)."""

    def __init__(self, environment):
        super().__init__(environment)
        self.settings = self._settings()
        self.client = self._shared_client()

    def wait_time(self) -> float:
        return self.settings.think_time

    def _settings(self) -> SageMakerSettings:
        from_class = SageMakerSettings(
            endpoint_name=self.endpoint_name, endpoint_url=self.endpoint_url, region=self.region,
            aws_profile=self.aws_profile, think_time=self.think_time, connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout, transport=self.transport,
        )
        options = self.environment.parsed_options
        if options is None:
            return from_class
        from_options = SageMakerSettings.from_options(options)
        for name, value in vars(from_options).items():
            if value not in ("", None) and not (name in ("think_time", "connect_timeout", "read_timeout", "transport")
                                                 and value == getattr(SageMakerSettings, name)):
                setattr(from_class, name, value)
        return from_class

    def _shared_client(self):
        s = self.settings
        if not s.endpoint_name:
            raise ValueError(f"{type(self).__name__} has no endpoint name: set endpoint_name or pass --endpoint-name")
        client_cls = self.client_cls or client_class(s.transport)
        key = (client_cls, s.endpoint_name, s.endpoint_url, s.region, s.aws_profile, s.connect_timeout, s.read_timeout)
        cache = self.environment.__dict__.setdefault("_sm_locust_clients", {})
        client = cache.get(key)
        if client is None:
            client = cache[key] = client_cls(
                self.environment, s.endpoint_name, region=s.region or None, endpoint_url=s.endpoint_url or None,
                profile=s.aws_profile or None, pool_size=self.pool_size, connect_timeout=s.connect_timeout,
                read_timeout=s.read_timeout,
            )
        return client

    def invoke(self, body: bytes | str | Invocation, **fields) -> dict | None:
        """Invoke with a body (or a prepared Invocation); failures are reported, not raised."""
        if not isinstance(body, Invocation):
            body = Invocation(body=body.encode() if isinstance(body, str) else body, **fields)
        return self.client.invoke(body)
