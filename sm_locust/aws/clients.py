"""The one AWS client factory: every boto3 client sm-locust makes comes from `client(service, purpose)`.

Its rules: the region rule (`region.py`, else `default_region`); the profile (an unknown one: the
region rule's one line, else botocore's ProfileNotFound for the caller to word); the endpoint
(given, else botocore's AWS_ENDPOINT_URL_<SERVICE>); credentials (given, else the chain, else
placeholders for an endpoint on this machine: the local endpoint and CloudWatch stand-ins check no
signature, botocore still signs; the run's preflight gives its Locust child the same); retries and
timeouts by `Purpose` (the runtime request path one attempt: a throttle is a figure, never hidden
behind a retry). The fast transport signs its own requests and takes its region and credentials
from the same rules (`runtime_region`, `chain_credentials`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal, Protocol
from urllib.parse import urlparse

from sm_locust.aws.region import region_for

if TYPE_CHECKING:  # botocore loads when a client is made, never at import time
    from botocore.config import Config
    from botocore.credentials import Credentials, ReadOnlyCredentials

PLACEHOLDER_KEY = "sm-locust-local"
LOCAL_DEFAULT_REGION = "us-east-1"  # a local endpoint does not care; signing still needs a region

Missing = Literal["fail", "local-placeholders", "placeholders"]
# A boto3 client (or a test's fake or Stubber-wrapped one): the stubs type one service per call, so every
# client is this one alias, the only Any an AWS call needs.
AwsClient = Any


class FrozenCredentialsSource(Protocol):
    """Where keys are read from: botocore's `Credentials` or `RefreshableCredentials` (or a test's stand-in)."""

    def get_frozen_credentials(self) -> ReadOnlyCredentials: ...


@dataclass(frozen=True)
class Keys:
    """Static credentials: an access key, its secret and, for temporary ones, the session token."""

    access_key: str
    secret_key: str
    token: str | None = None

    @classmethod
    def of(cls, credentials: FrozenCredentialsSource) -> Keys:
        """A copy of a botocore credentials object's current keys."""
        frozen = credentials.get_frozen_credentials()
        return cls(frozen.access_key or "", frozen.secret_key or "", frozen.token)

    def __repr__(self) -> str:  # never show the keys
        return "Keys(...)"


PLACEHOLDER_KEYS = Keys(PLACEHOLDER_KEY, PLACEHOLDER_KEY)


@dataclass(frozen=True)
class Policy:
    """Retries and timeouts: None leaves botocore's default."""

    attempts: int | None = None  # total attempts, the first one included
    connect_timeout: float | None = None
    read_timeout: float | None = None
    keepalive: bool = False


class Purpose(Enum):
    """What a client is for decides its retries and timeouts."""

    RUNTIME = Policy(attempts=1, keepalive=True)  # the request path: one attempt; timeouts the run's options
    CONTROL = Policy()  # SageMaker, Application Auto Scaling, S3: botocore's retries and timeouts
    READ = Policy(attempts=2, connect_timeout=5, read_timeout=30)  # a report's metrics: a failure is a gap
    PUBLISH = Policy(attempts=1, connect_timeout=5, read_timeout=15)  # live metrics: the sender retries itself


def is_loopback(url: object) -> bool:
    """True for a URL whose host is this machine: localhost, 127.0.0.0/8, ::1, or 0.0.0.0 (the
    any-address a local server listens on); False for anything that is not a URL."""
    if not isinstance(url, str) or "://" not in url:
        return False
    host = (urlparse(url).hostname or "").lower()
    if host in ("localhost", "0.0.0.0"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def runtime_region(region: str | None, profile: str | None, endpoint_url: str | None) -> str | None:
    """The region rule, else `LOCAL_DEFAULT_REGION` for a given endpoint URL, else None."""
    return region_for(region, profile) or (LOCAL_DEFAULT_REGION if endpoint_url else None)


def chain_credentials(profile: str | None = None) -> Credentials | None:
    """The credentials boto3's chain finds for `profile` (None when it finds none); no network call
    beyond what the chain itself makes."""
    import botocore.session  # lazy: botocore costs ~190 ms (measured); after Locust has patched gevent

    return botocore.session.Session(profile=profile or None).get_credentials()


def config(purpose: Purpose, *, pool_size: int | None = None, connect_timeout: float | None = None,
           read_timeout: float | None = None) -> Config:
    """The botocore `Config` of `purpose`; a given timeout or pool size replaces the purpose's."""
    from botocore.config import Config  # lazy: with boto3, only when a client is made

    policy = purpose.value
    settings: dict[str, Any] = {}
    if policy.attempts is not None:
        settings["retries"] = {"mode": "standard", "total_max_attempts": policy.attempts}
    for name, given, default in (("connect_timeout", connect_timeout, policy.connect_timeout),
                                 ("read_timeout", read_timeout, policy.read_timeout),
                                 ("max_pool_connections", pool_size, None)):
        if given is not None or default is not None:
            settings[name] = given if given is not None else default
    if policy.keepalive:
        settings["tcp_keepalive"] = True
    return Config(**settings)


def client(service: str, purpose: Purpose, *, region: str | None = None, profile: str | None = None,
           endpoint_url: str | None = None, default_region: str | None = None, keys: Keys | None = None,
           when_none: Missing = "local-placeholders", pool_size: int | None = None,
           connect_timeout: float | None = None, read_timeout: float | None = None) -> AwsClient:
    """A boto3 client for `service` by the module's rules.

    `when_none`: what happens when neither `keys` nor the chain gives credentials: "fail" (botocore's
    NoCredentialsError at the first call), "local-placeholders" (placeholders for a loopback
    endpoint, the rule), "placeholders" (placeholders whatever the endpoint: the failure is then the
    service's answer)."""
    return clients((service,), purpose, region=region, profile=profile, endpoint_url=endpoint_url,
                   default_region=default_region, keys=keys, when_none=when_none, pool_size=pool_size,
                   connect_timeout=connect_timeout, read_timeout=read_timeout)[0]


def clients(services: Sequence[str], purpose: Purpose, *, region: str | None = None, profile: str | None = None,
            endpoint_url: str | None = None, default_region: str | None = None, keys: Keys | None = None,
            when_none: Missing = "local-placeholders", pool_size: int | None = None,
            connect_timeout: float | None = None, read_timeout: float | None = None) -> tuple[AwsClient, ...]:
    """One client per service, from one session (a session costs more than a client), as `client`."""
    import boto3  # lazy: boto3 costs ~230 ms to import (measured); only commands that talk to AWS need it

    picked = region_for(region, profile) or default_region or None  # first: its words for an unknown profile
    session: Any = boto3.session.Session(profile_name=profile or None)  # Any: the stubs type one service per call
    options = config(purpose, pool_size=pool_size, connect_timeout=connect_timeout, read_timeout=read_timeout)

    def build(service: str, with_keys: Keys | None) -> AwsClient:
        secrets = {} if with_keys is None else {"aws_access_key_id": with_keys.access_key,
                                                "aws_secret_access_key": with_keys.secret_key,
                                                "aws_session_token": with_keys.token}
        return session.client(service, region_name=picked, endpoint_url=endpoint_url or None, config=options,
                              **secrets)

    def made(service: str) -> AwsClient:
        built = build(service, keys)
        if keys is None and when_none != "fail":
            wanted = when_none == "placeholders" or is_loopback(built.meta.endpoint_url)
            if wanted and session.get_credentials() is None:
                built = build(service, PLACEHOLDER_KEYS)
        return built

    return tuple(made(service) for service in services)
