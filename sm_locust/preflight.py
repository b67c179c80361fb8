"""Checks made before a run starts, so bad input fails in one line instead of mid-run.

Each check raises a `UsageError` (exit 2) or `RunError` (exit 1) naming what is wrong and how to
fix it: no endpoint, unreadable payload, unknown profile, no region, no credentials, an endpoint
URL that refuses connections. Credentials are looked up, never printed.

`is_loopback` is the one test of "this URL is this machine" (placeholder credentials for the local
endpoint and for CloudWatch stand-ins, a report that knows the run was local).
"""

from __future__ import annotations

import ipaddress
import os
import socket
from urllib.parse import urlparse

from sm_locust.errors import RunError, UsageError
from sm_locust.options import SageMakerSettings

LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "sm-locust-local", "AWS_SECRET_ACCESS_KEY": "sm-locust-local"}


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


def check_reachable(url: str, timeout: float = 3.0) -> None:
    """Raise RunError when nothing accepts TCP connections at url's host:port."""
    parsed = urlparse(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((parsed.hostname, port), timeout=timeout):
            pass
    except ConnectionRefusedError:
        raise RunError(f"cannot connect to {url}: connection refused; is the endpoint running? (check --endpoint-url)") from None
    except socket.timeout:
        raise RunError(f"cannot connect to {url}: no answer within {timeout:.0f} s (check --endpoint-url)") from None
    except OSError as exc:
        raise RunError(f"cannot connect to {url}: {exc.strerror or exc} (check --endpoint-url)") from None


def aws_environment(settings: SageMakerSettings) -> dict[str, str]:
    """Extra environment for the Locust process; checks region and credentials for real AWS.

    Against a loopback endpoint with no credentials configured, placeholder keys are supplied (the
    local endpoint does not check signatures, botocore still signs).
    """
    import botocore.exceptions
    import botocore.session

    extra: dict[str, str] = {}
    try:
        session = botocore.session.Session(profile=settings.aws_profile or None)
        credentials = session.get_credentials()
        region = settings.region or session.get_config_variable("region")
    except botocore.exceptions.ProfileNotFound:
        raise UsageError(f"AWS profile {settings.aws_profile!r} not found; check --aws-profile / AWS_PROFILE and ~/.aws/config") from None
    local = is_loopback(settings.endpoint_url)
    if credentials is None:
        if local:
            extra.update(LOCAL_CREDENTIALS)
        else:
            raise UsageError("no AWS credentials found; configure them (aws configure, AWS_PROFILE, or AWS_ACCESS_KEY_ID/"
                             "AWS_SECRET_ACCESS_KEY) or point --endpoint-url at a local endpoint")
    if not region:
        if settings.endpoint_url:
            extra["AWS_DEFAULT_REGION"] = "us-east-1"
        else:
            raise UsageError("no AWS region: pass --region (or set AWS_REGION / a profile region)")
    return extra


def preflight(settings: SageMakerSettings, *, need_payload: bool = True) -> dict[str, str]:
    """All checks for a run; returns extra environment variables for the Locust process."""
    settings.validate(need_payload=need_payload)
    env = aws_environment(settings)
    url = settings.endpoint_url or os.environ.get("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME") or ""
    if url:
        check_reachable(url)
    return env
