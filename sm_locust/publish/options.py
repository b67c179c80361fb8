"""The live-metrics options (`--publish`, `--publish-period`, `--publish-namespace`, `--dashboard`)
and `PublishSettings`, their typed view: where a run's client-side figures go while it runs.

Every one of them decides where data goes (an AWS account's CloudWatch namespace, a dashboard that
PutDashboard overwrites, a port that serves the run's figures), so none is shown or accepted by the
web UI (`web_ui=False`, refused by `locustfiles/_webui.py`): they come from the command line,
`SM_LOCUST_*` variables or locust.conf only. docs/live-metrics.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sm_locust.config.options import Options, OptionSpec
from sm_locust.errors import UsageError
from sm_locust.util.numbers import check_number

CLOUDWATCH = "cloudwatch"
PROMETHEUS = "prometheus"
DEFAULT_NAMESPACE = "sm-locust"
DEFAULT_PROMETHEUS_HOST = "127.0.0.1"
DEFAULT_PROMETHEUS_PORT = 9646
DEFAULT_PERIOD_S = 60
# CloudWatch reads a high-resolution metric at 1, 5, 10, 30 s or a multiple of 60 s (docs/facts.md)
PERIODS_S = (1, 5, 10, 30, 60)
DASHBOARD_AUTO = "auto"  # `--dashboard` alone: named after the endpoint (`sm-locust-<endpoint>`)
DASHBOARD_PREFIX = "sm-locust-"
DASHBOARD_NAME = re.compile(r"^[A-Za-z0-9_-]{1,255}$")  # PutDashboard: alphanumerics, '-', '_'
MAX_NAMESPACE = 255


def parse_destinations(text: str) -> str:
    """`cloudwatch`, `prometheus`, `prometheus:PORT`, `prometheus:HOST:PORT`, comma-separated, as one
    canonical text (`cloudwatch,prometheus:127.0.0.1:9646`); a UsageError for anything else."""
    cloudwatch, prometheus = False, None
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        kind, _, rest = item.partition(":")
        if kind.lower() == CLOUDWATCH and not rest:
            cloudwatch = True
        elif kind.lower() == PROMETHEUS:
            if prometheus is not None:
                raise UsageError(f"prometheus is named twice in {text!r}")
            prometheus = _prometheus_address(rest)
        else:
            raise UsageError(f"{item!r} is not a destination; use cloudwatch, prometheus or prometheus:HOST:PORT")
    parts = ([CLOUDWATCH] if cloudwatch else []) + ([f"{PROMETHEUS}:{prometheus[0]}:{prometheus[1]}"]
                                                    if prometheus else [])
    if not parts:
        raise UsageError(f"{text!r} names no destination; use cloudwatch, prometheus or prometheus:HOST:PORT")
    return ",".join(parts)


def _prometheus_address(rest: str) -> tuple[str, int]:
    if not rest:
        return DEFAULT_PROMETHEUS_HOST, DEFAULT_PROMETHEUS_PORT
    host, sep, port = rest.rpartition(":")
    if not sep:
        host, port = DEFAULT_PROMETHEUS_HOST, rest
    if not host or not re.fullmatch(r"[A-Za-z0-9.\-]+", host):
        raise UsageError(f"prometheus:{rest}: the host must be a name or an IPv4 address, e.g. prometheus:0.0.0.0:9646")
    return host, int(check_number(port, f"the port in prometheus:{rest}", int, minimum=1, maximum=65535))


def check_namespace(text: str) -> str:
    """A custom-metric namespace CloudWatch takes: 1-255 characters, not `AWS/...` (reserved for AWS
    services), not starting with ':' (the API's pattern)."""
    if len(text) > MAX_NAMESPACE or text.startswith(":") or text.upper().startswith("AWS/"):
        raise UsageError(f"{text!r} is not a custom namespace: at most {MAX_NAMESPACE} characters, not starting with "
                         "':' or 'AWS/' (reserved for AWS services)")
    return text


def check_dashboard(text: str) -> str:
    """`auto` or a dashboard name PutDashboard takes (letters, digits, '-', '_'; at most 255)."""
    if text == DASHBOARD_AUTO or DASHBOARD_NAME.match(text):
        return text
    raise UsageError(f"{text!r} is not a dashboard name: letters, digits, '-' and '_' only, at most 255")


OPTIONS: list[OptionSpec] = [
    OptionSpec("--publish", "SM_LOCUST_PUBLISH", "",
               "publish the client's live figures while the run goes: cloudwatch (custom metrics, from the "
               "master), prometheus[:HOST:PORT] (/metrics on the master, default 127.0.0.1:9646), or both "
               "comma-separated (docs/live-metrics.md)",
               web_ui=False, convert=parse_destinations),
    OptionSpec("--publish-period", "SM_LOCUST_PUBLISH_PERIOD", DEFAULT_PERIOD_S,
               "seconds per CloudWatch data point: 60, or 1/5/10/30 for high-resolution metrics "
               "(StorageResolution 1; more PutMetricData calls)",
               int, web_ui=False, choices=PERIODS_S),
    OptionSpec("--publish-namespace", "SM_LOCUST_PUBLISH_NAMESPACE", DEFAULT_NAMESPACE,
               "CloudWatch namespace of the published metrics", web_ui=False, convert=check_namespace),
    OptionSpec("--dashboard", "SM_LOCUST_DASHBOARD", "",
               "create or update a CloudWatch dashboard (the flag alone: sm-locust-<endpoint>; or NAME) with the "
               "client's latency beside the endpoint's metrics; needs --publish cloudwatch",
               web_ui=False, convert=check_dashboard, const=DASHBOARD_AUTO),
]


@dataclass(frozen=True)
class PublishSettings:
    """Where a run's live figures go (from parsed `Options`); `active` is False when nowhere."""

    cloudwatch: bool = False
    prometheus: tuple[str, int] | None = None
    period_s: int = DEFAULT_PERIOD_S
    namespace: str = DEFAULT_NAMESPACE
    dashboard: str = ""

    @classmethod
    def from_options(cls, options: Options) -> PublishSettings:
        cloudwatch, prometheus = False, None
        for item in (options.publish or "").split(","):
            kind, _, address = item.partition(":")
            if kind == CLOUDWATCH:
                cloudwatch = True
            elif kind == PROMETHEUS:
                host, _, port = address.rpartition(":")
                prometheus = (host, int(port))
        return cls(cloudwatch=cloudwatch, prometheus=prometheus, period_s=int(options.publish_period),
                   namespace=options.publish_namespace, dashboard=options.dashboard or "")

    @property
    def active(self) -> bool:
        return self.cloudwatch or self.prometheus is not None

    @property
    def storage_resolution(self) -> int:
        """PutMetricData's StorageResolution: 1 (high resolution) for periods under a minute, else 60."""
        return 1 if self.period_s < 60 else 60

    def validate(self) -> PublishSettings:
        """The rules between the options (each option's own range is its spec's)."""
        if self.dashboard and not self.cloudwatch:
            raise UsageError("--dashboard shows the client's published metrics beside the endpoint's: add "
                             "--publish cloudwatch")
        return self

    def dashboard_name(self, endpoint_name: str) -> str | None:
        """The dashboard's name: the one given, else `sm-locust-<endpoint>` (never the endpoint's bare name, so
        a team's own dashboard named after the endpoint is not overwritten); None without --dashboard."""
        if not self.dashboard:
            return None
        if self.dashboard != DASHBOARD_AUTO:
            return self.dashboard
        return (DASHBOARD_PREFIX + re.sub(r"[^A-Za-z0-9_-]", "-", endpoint_name))[:255]
