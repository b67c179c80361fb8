"""The one region rule, for every command: the flag, then AWS_REGION, then AWS_DEFAULT_REGION, then
the AWS profile's region.

Why: botocore reads AWS_DEFAULT_REGION and the profile, not AWS_REGION (the variable the AWS CLI
v2 and the other SDKs read first). `report --cloudwatch` and `sweep --cleanup` said "set
AWS_REGION" and then ignored it; `run` honoured it (the fast transport reads it). Every boto3
session sm-locust makes gets its region from `region_for`, and a Locust child gets the resolved
region in both variables (`child_environment`), so both transports sign for the same one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from sm_locust.errors import UsageError

REGION_VARIABLES = ("AWS_REGION", "AWS_DEFAULT_REGION")
ENDPOINT_URL_ENV = ("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", "AWS_ENDPOINT_URL")
NO_REGION = ("no AWS region{what}: pass --region, or set AWS_REGION or AWS_DEFAULT_REGION, or give the AWS profile "
             "a region (aws configure set region us-east-1)")


def region_source(flag: str | None, profile: str | None = None,
                  environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(region, where it came from): `--region`, `AWS_REGION`, `AWS_DEFAULT_REGION`, `profile NAME`;
    ("", "") when none says. An unknown profile is a one-line UsageError."""
    if flag:
        return flag, "--region"
    environ = os.environ if environ is None else environ
    for name in REGION_VARIABLES:
        if environ.get(name):
            return environ[name], name
    found = profile_region(profile)
    return (found, f"profile {profile or 'default'}") if found else ("", "")


def region_for(flag: str | None, profile: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The region the rule picks ("" when none)."""
    return region_source(flag, profile, environ)[0]


def require_region(flag: str | None, profile: str | None = None, what: str = "",
                   environ: Mapping[str, str] | None = None) -> str:
    """The region the rule picks, or a one-line UsageError saying every way to give one."""
    region = region_for(flag, profile, environ)
    if not region:
        raise UsageError(NO_REGION.format(what=f" {what}" if what else ""))
    return region


def child_environment(region: str) -> dict[str, str]:
    """Environment entries that make a child process (Locust, either transport) use `region`."""
    return dict.fromkeys(REGION_VARIABLES, region) if region else {}


def profile_region(profile: str | None) -> str:
    """The region of the AWS profile (`profile`, else AWS_PROFILE / default) from the config file; no network."""
    # lazy: botocore (~100 ms) only when neither the flag nor a variable names the region
    import botocore.exceptions
    import botocore.session

    try:
        return botocore.session.Session(profile=profile or None).get_scoped_config().get("region") or ""
    except botocore.exceptions.ProfileNotFound:
        raise UsageError(f"AWS profile {profile!r} not found; check the profile option / AWS_PROFILE and "
                         "~/.aws/config") from None


def endpoint_url_for(region: str, endpoint_url: str | None = None) -> str:
    """`endpoint_url`, else `AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME` / `AWS_ENDPOINT_URL`, else AWS."""
    for candidate in (endpoint_url, *(os.environ.get(name) for name in ENDPOINT_URL_ENV)):
        if candidate:
            return candidate.rstrip("/")
    return f"https://runtime.sagemaker.{region}.amazonaws.com"
