"""Checks made before a run starts, so bad input fails in one line instead of mid-run.

Each check raises `UsageError` (exit 2) or `RunError` (exit 1) naming what is wrong and how to fix
it: endpoint, payload, profile, region, credentials, a refusing endpoint URL, an unreachable AWS
host. Credentials are looked up, never printed; `plain_http_warning` names the one case where they
would travel unencrypted (a signed request over http:// to another machine).
"""

from __future__ import annotations

import os
import re
import socket
import time
import urllib.request
from collections.abc import Mapping
from urllib.parse import urlparse

from sm_locust.aws.clients import PLACEHOLDER_KEY, chain_credentials, is_loopback
from sm_locust.aws.region import NO_REGION, child_environment, endpoint_url_for, region_for
from sm_locust.config.endpoint import SageMakerSettings
from sm_locust.errors import RunError, UsageError

# the AWS client factory's placeholders, as the Locust child's environment
LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": PLACEHOLDER_KEY, "AWS_SECRET_ACCESS_KEY": PLACEHOLDER_KEY}
# botocore's own rule for a region name (a host-name label); AWS's regions also read like us-east-1.
REGION_NAME = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])?$")
AWS_REGION_NAME = re.compile(r"^[a-z]{2}(?:-[a-z]+)+-\d+$")


# A local endpoint started a moment ago (`sm-locust serve ... &` on the line before, as the README's
# examples do) takes a second or two to listen: a refused loopback connection is retried this long.
LOOPBACK_GRACE_S = 5.0


def check_reachable(url: str, timeout: float = 3.0, hint: str = "check --endpoint-url",
                    grace_s: float | None = None) -> None:
    """Raise RunError when nothing accepts TCP connections at url's host:port; a refused connection
    to this machine is retried for `grace_s` (default LOOPBACK_GRACE_S) while a local endpoint starts."""
    parsed = urlparse(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    grace = (LOOPBACK_GRACE_S if is_loopback(url) else 0.0) if grace_s is None else grace_s
    deadline = time.monotonic() + grace
    try:
        while True:
            try:
                with socket.create_connection((parsed.hostname, port), timeout=timeout):
                    return
            except ConnectionRefusedError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)
    except ConnectionRefusedError:
        waited = f" (waited {grace:g} s for it to start)" if grace else ""
        raise RunError(f"cannot connect to {url}: connection refused{waited}; is the endpoint running? "
                       f"({hint})") from None
    except TimeoutError:
        raise RunError(f"cannot connect to {url}: no answer within {timeout:.0f} s ({hint})") from None
    except OSError as exc:
        raise RunError(f"cannot connect to {url}: {exc.strerror or exc} ({hint})") from None


def check_region(region: str | None, *, aws: bool) -> None:
    """A UsageError for a region name botocore would refuse (for both transports), and, against AWS
    (`aws`: no endpoint URL), for one that is not shaped like an AWS region (us-east-1)."""
    if not region:
        return
    if not REGION_NAME.match(region):
        raise UsageError(f"--region {region!r} is not a valid region name (letters, digits and '-', e.g. us-east-1)")
    if aws and not AWS_REGION_NAME.match(region):
        raise UsageError(f"--region {region!r} is not an AWS region name (e.g. us-east-1, eu-west-2); "
                         "check --region / AWS_REGION / the profile's region")


def check_aws_reachable(region: str, timeout: float = 3.0) -> None:
    """Against AWS: the regional runtime host resolves and accepts connections (skipped behind a proxy,
    which boto3 would use)."""
    url = endpoint_url_for(region)
    host = urlparse(url).hostname or ""
    if "https" in urllib.request.getproxies() and not urllib.request.proxy_bypass(host):
        return
    check_reachable(url, timeout,
                    hint=f"no network, or no SageMaker in region {region}? check --region and the connection")


def plain_http_warning(url: str | None) -> str | None:
    """A one-line warning when signed requests (and a session token) would go over plain http to
    another machine; None for https, a loopback address, or no URL."""
    if not url or not url.lower().startswith("http://") or is_loopback(url):
        return None
    return (f"--endpoint-url {url} is plain http to another machine: the signed requests and any session token "
            "travel unencrypted; use https:// (or a loopback address for a local endpoint)")


def aws_environment(settings: SageMakerSettings, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Extra environment for the Locust process; checks region and credentials for real AWS.

    Against a loopback endpoint with no credentials configured, placeholder keys are supplied (the
    local endpoint does not check signatures, botocore still signs). `env`: environment the run adds
    for the Locust process (a SageMaker SDK session's keys, from the Python API): its keys count as
    credentials found.
    """
    # lazy: botocore costs ~190 ms (measured); serve and report import this module for is_loopback only
    import botocore.exceptions

    extra: dict[str, str] = {}
    try:
        given = bool((env or {}).get("AWS_ACCESS_KEY_ID"))
        credentials = None if given else chain_credentials(settings.aws_profile)
    except botocore.exceptions.ProfileNotFound:
        raise UsageError(f"AWS profile {settings.aws_profile!r} not found; check --aws-profile / AWS_PROFILE and "
                         "~/.aws/config") from None
    local = is_loopback(settings.endpoint_url)
    if credentials is None and not given:
        if local:
            extra.update(LOCAL_CREDENTIALS)
        else:
            raise UsageError("no AWS credentials found; configure them (aws configure, AWS_PROFILE, or "
                             "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY) or point --endpoint-url at a local endpoint")
    # the one rule (sm_locust/aws/region.py), over the environment the Locust process will have
    region = region_for(settings.region, settings.aws_profile, environ={**os.environ, **(env or {})})
    if not region:
        if not settings.endpoint_url:
            raise UsageError(NO_REGION.format(what=""))
        region = "us-east-1"  # a local endpoint does not care; botocore still signs for one
    check_region(region, aws=not runtime_url(settings))
    extra.update(child_environment(region))  # both transports in the Locust process sign for this one
    return extra


def runtime_url(settings: SageMakerSettings) -> str:
    """The runtime URL the run will call when it is not AWS's regional one ("" = AWS)."""
    return settings.endpoint_url or os.environ.get("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME") or ""


def aws_region(settings: SageMakerSettings) -> str:
    """The region a run against AWS signs for (sm_locust/aws/region.py's rule; "" when none)."""
    return region_for(settings.region, settings.aws_profile)


def preflight(settings: SageMakerSettings, *, need_payload: bool = True,
              env: Mapping[str, str] | None = None) -> dict[str, str]:
    """All checks for a run; returns extra environment variables for the Locust process (`env`: the
    environment the caller adds to it, see `aws_environment`)."""
    settings.validate(need_payload=need_payload)
    env = aws_environment(settings, env)
    url = runtime_url(settings)
    if url:
        check_reachable(url)
    else:
        check_aws_reachable(aws_region(settings))
    return env
