"""Before a SageMaker sweep (or autoscaling test) creates anything: can it?

`check_before_creating` checks credentials, region, `model_name`, instance types and the account's
"<instance type> for endpoint usage" quota against `max_parallel_endpoints x instance_count` (read
by name with ListServiceQuotas, then ListAWSDefaultServiceQuotas; docs/facts.md), in one table: each
check `ok`, `failed` (exit 2, nothing created) or `unknown` (a warning). The pure parts (`needs_for`,
`quota_checks`, `Precheck`) are fed data; clients are injected. Autoscaling passes
`Need(instance_type, max_instances, model_name)`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sm_locust.aws.clients import AwsClient, Purpose, chain_credentials, client
from sm_locust.aws.region import NO_REGION, region_for
from sm_locust.errors import UsageError, aws_error

SERVICE_CODE = "sagemaker"
QUOTA_NAME = "{} for endpoint usage"
OK, FAILED, UNKNOWN = "ok", "failed", "unknown"
CREDENTIAL_ERRORS = ("InvalidClientTokenId", "UnrecognizedClientException", "ExpiredToken", "ExpiredTokenException",
                     "SignatureDoesNotMatch", "InvalidSignatureException", "MissingAuthenticationToken")


@dataclass(frozen=True)
class Need:
    """What one instance type must hold at once: `instances` (max_parallel_endpoints x instance_count,
    or an autoscaling policy's max_instances), and the model the endpoints clone (None: image + role)."""

    instance_type: str
    instances: int
    model_name: str | None = None


@dataclass(frozen=True)
class Check:
    item: str
    status: str  # OK, FAILED, UNKNOWN
    detail: str


@dataclass
class Precheck:
    """The answers, in the order they were asked."""

    checks: list[Check] = field(default_factory=list)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == FAILED]

    @property
    def unknown(self) -> list[Check]:
        return [c for c in self.checks if c.status == UNKNOWN]

    def table(self) -> list[str]:
        """One line per check: `  ok       credentials: ...`."""
        width = max((len(c.item) for c in self.checks), default=0)
        return [f"  {c.status:<8} {c.item:<{width}}  {c.detail}" for c in self.checks]

    def raise_for_failures(self) -> None:
        """A one-line UsageError (exit 2) naming the first sure failure (and how many more)."""
        failed = self.failed
        if failed:
            more = f" (and {len(failed) - 1} more, listed above)" if len(failed) > 1 else ""
            first = failed[0]
            raise UsageError(f"before creating anything: {first.item}: {first.detail}{more}; nothing was created")


def needs_for(configurations: Iterable[Mapping[str, Any]], max_parallel: int) -> list[Need]:
    """Per instance type, the most instances a sweep holds at once: at most `max_parallel`
    configurations are deployed together, so the largest `max_parallel` instance counts of that type
    (pure)."""
    counts: dict[str, list[int]] = defaultdict(list)
    models: dict[str, str | None] = {}
    for settings in configurations:
        instance_type = settings.get("instance_type")
        if not instance_type:
            continue
        counts[instance_type].append(int(settings.get("instance_count") or 1))
        models.setdefault(instance_type, settings.get("model_name"))
    return [Need(t, sum(sorted(c, reverse=True)[:max(1, max_parallel)]), models[t]) for t, c in counts.items()]


def quota_checks(needs: Sequence[Need], quotas: Mapping[str, float], region: str) -> list[Check]:
    """Each instance type's need against its 'for endpoint usage' quota (`quotas`: quota name ->
    value, as Service Quotas lists them) (pure)."""
    wanted: dict[str, int] = defaultdict(int)
    for need in needs:
        wanted[need.instance_type] = max(wanted[need.instance_type], need.instances)
    checks = []
    for instance_type, instances in wanted.items():
        name = QUOTA_NAME.format(instance_type)
        item = f"quota {name!r}"
        if name not in quotas:
            checks.append(Check(item, UNKNOWN, f"Service Quotas lists no such quota in {region}: is {instance_type} "
                                               "offered for real-time endpoints there?"))
            continue
        value = quotas[name]
        if value < instances:
            checks.append(Check(item, FAILED, f"is {value:g} in {region}, the sweep holds {instances} at once "
                                              "(max_parallel_endpoints x instance_count): request an increase in "
                                              "Service Quotas, or lower max_parallel_endpoints"))
        else:
            checks.append(Check(item, OK, f"{value:g} >= {instances} at once (endpoints of other sweeps and "
                                          "applications count against it too)"))
    return checks


def _code(exc: Exception) -> str:
    return (aws_error(exc) or (type(exc).__name__, ""))[0]


def _message(exc: Exception) -> str:
    return (aws_error(exc) or ("", str(exc)))[1]


def _list_quotas(quotas: AwsClient) -> dict[str, float]:
    """Quota name -> value for the service: the applied values, and the defaults of the quotas the
    applied list leaves out (ListServiceQuotas omits quotas whose applied value is not available)."""
    values: dict[str, float] = {}
    for operation in ("list_aws_default_service_quotas", "list_service_quotas"):  # applied values win
        for page in quotas.get_paginator(operation).paginate(ServiceCode=SERVICE_CODE):
            for quota in page.get("Quotas") or []:
                if quota.get("QuotaName") is not None and quota.get("Value") is not None:
                    values[quota["QuotaName"]] = float(quota["Value"])
    return values


def check_before_creating(needs: Sequence[Need], *, region: str | None = None, profile: str | None = None,
                          sagemaker: AwsClient = None, quotas: AwsClient = None) -> Precheck:
    """Credentials and region, each model, each instance type, each quota, before anything is created.

    `sagemaker` / `quotas`: boto3 clients (default: the AWS client factory's, sm_locust.aws.clients);
    tests inject them. Never raises for what it finds: read `failed` / `unknown`, or call
    `raise_for_failures()`."""
    result = Precheck()
    add = result.checks.append
    if sagemaker is None or quotas is None:
        import botocore.exceptions  # lazy: botocore (~190 ms, measured), only for a SageMaker sweep about to create

        picked = region_for(region, profile)
        if not picked:
            add(Check("region", FAILED, NO_REGION.format(what="").removeprefix("no AWS region: ")))
            return result
        try:
            found = chain_credentials(profile)
        except botocore.exceptions.ProfileNotFound:
            add(Check("credentials", FAILED, f"AWS profile {profile!r} not found (AWS_PROFILE, ~/.aws/config)"))
            return result
        if found is None:
            add(Check("credentials", FAILED, "none found: configure them (aws configure, AWS_PROFILE, or "
                                             "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)"))
            return result
        sagemaker = sagemaker or client("sagemaker", Purpose.CONTROL, region=picked, profile=profile)
        # short timeouts: a quota that cannot be read is a warning, not a wait
        quotas = quotas or client("service-quotas", Purpose.READ, region=picked, profile=profile, read_timeout=15)
    region_name = getattr(getattr(sagemaker, "meta", None), "region_name", None) or region or "?"
    try:  # the cheapest signed call: are the credentials accepted in this region?
        sagemaker.list_endpoints(MaxResults=1)
        add(Check("credentials", OK, f"accepted by SageMaker in {region_name}"))
    except Exception as exc:
        code = _code(exc)
        if code in CREDENTIAL_ERRORS or type(exc).__name__ in ("NoCredentialsError", "PartialCredentialsError"):
            add(Check("credentials", FAILED, f"refused by SageMaker in {region_name} ({code}: {_message(exc)})"))
            return result
        if not hasattr(exc, "response"):  # no answer at all: a wrong region name, no network
            add(Check("region", FAILED, f"SageMaker in {region_name} cannot be reached ({_message(exc)})"))
            return result
        add(Check("credentials", UNKNOWN, f"ListEndpoints answered {code}: {_message(exc)}"))
    for model in sorted({n.model_name for n in needs if n.model_name}):
        try:
            sagemaker.describe_model(ModelName=model)
            add(Check(f"model {model!r}", OK, f"exists in {region_name}"))
        except Exception as exc:
            code, message = _code(exc), _message(exc)
            missing = code in ("ValidationException", "ResourceNotFound") and "could not find" in message.lower()
            add(Check(f"model {model!r}", FAILED if missing else UNKNOWN,
                      f"does not exist in {region_name} (DescribeModel: {message})" if missing
                      else f"DescribeModel answered {code}: {message}"))
    try:
        valid = set(sagemaker.meta.service_model.shape_for("ProductionVariantInstanceType").enum)
    except Exception:  # a client without the service model (a stand-in): cannot tell
        valid = set()
    for instance_type in sorted({n.instance_type for n in needs}):
        if valid and instance_type not in valid:
            close = sorted(v for v in valid if v.split(".")[1:2] == instance_type.split(".")[1:2])[:4]
            add(Check(f"instance type {instance_type}", FAILED, "SageMaker has no such instance type for endpoints"
                      + (f" (the {instance_type.split('.')[1]} family: {', '.join(close)})" if close else "")))
        elif valid:
            add(Check(f"instance type {instance_type}", OK, "a SageMaker endpoint instance type"))
    try:
        listed = _list_quotas(quotas)
    except Exception as exc:
        for instance_type in sorted({n.instance_type for n in needs}):
            add(Check(f"quota {QUOTA_NAME.format(instance_type)!r}", UNKNOWN,
                      f"Service Quotas could not be read ({_code(exc)}: {_message(exc)}); the sweep may stop at "
                      "CreateEndpoint with ResourceLimitExceeded"))
        return result
    invalid = {c.item.removeprefix("instance type ") for c in result.checks if c.status == FAILED}
    for check in quota_checks([n for n in needs if n.instance_type not in invalid], listed, region_name):
        result.checks.append(check)
    return result

