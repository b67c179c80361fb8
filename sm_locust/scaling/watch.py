"""`sm-locust run --watch-scaling`: what an endpoint's own scaling policy did under the run's traffic.

It only reads: before the run, the variant's scaling configuration and instance type; during it,
DescribeEndpoint every 10 s (`aws.InstancePoller`); after it, the shared figures go into
summary.json as `autoscaling`. Every client it makes is `aws.read_only` (a mutating call raises).
Against the local fleet emulation it polls the emulator itself, every 10 *emulated* seconds.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sm_locust.aws.clients import LOCAL_DEFAULT_REGION, Purpose, client, is_loopback
from sm_locust.config.endpoint import SageMakerSettings
from sm_locust.errors import UsageError
from sm_locust.measure.steady import DEFAULT_SLO_PERCENTILE
from sm_locust.record.model import Autoscaling, JsonObject, Record, Summary, json_field
from sm_locust.record.summary import write_json
from sm_locust.record.timeline import read_seconds, timeline_path
from sm_locust.report.cost import load_prices
from sm_locust.scaling.aws import (
    POLL_EVERY_S,
    InstancePoller,
    InstanceReading,
    ScalingError,
    ScalingSnapshot,
    VariantRef,
    api_error,
    clients,
    read_only,
    snapshot,
)
from sm_locust.scaling.figures import autoscaling_figures, describe_change, describe_event
from sm_locust.scaling.policy import ScalingPolicy
from sm_locust.scaling.timeline import RunClock
from sm_locust.util.formatting import count

LOCAL_ROUTE = "/_sm_locust/scaling"

Say = Callable[[str], None]


def _say(text: str) -> None:
    print(f"sm-locust: {text}", flush=True)


@dataclass(frozen=True, kw_only=True)
class FleetLog(Record):
    """The local fleet emulation's own record (`GET /_sm_locust/scaling`, and `fleet_log.json` of an
    autoscaling sweep's run): what a watcher reads of it; read without judging."""

    time_scale: float | None = json_field("number?")  # emulated seconds per real second
    started_at: float | None = json_field("number?")  # the fleet's emulated second 0, epoch seconds
    policy: JsonObject | None = json_field("object?")  # scaling.policy.ScalingPolicy's fields, or None
    instances: list[JsonObject] | None = json_field("list?")  # scaling.timeline.InstanceSample, emulated seconds


def local_fleet(url: str, timeout: float = 3.0) -> dict[str, Any] | None:
    """The local fleet emulation's own description (time scale, policy, log) at `url`, None when the
    server there is not a fleet."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + LOCAL_ROUTE, timeout=timeout) as response:
            data = json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def choose_variant(sm, endpoint: str, wanted: str = "") -> VariantRef:
    """`wanted` (--target-variant), else the endpoint's only variant; a one-line UsageError otherwise."""
    if wanted:
        return VariantRef(endpoint, wanted)
    try:
        described = sm.describe_endpoint(EndpointName=endpoint)
        variants = [v.get("VariantName") for v in described.get("ProductionVariants") or []]
    except Exception as exc:
        parts = api_error(exc)
        if parts is None:
            raise
        raise UsageError(f"--watch-scaling: DescribeEndpoint {endpoint}: {parts[0]}: {parts[1]}") from None
    if len(variants) != 1:
        raise UsageError(f"--watch-scaling: endpoint {endpoint} has {len(variants)} variants "
                         f"({', '.join(map(str, variants)) or 'none'}); name the one to watch with --target-variant")
    return VariantRef(endpoint, str(variants[0]))


def instance_price(sm, ref: VariantRef) -> tuple[str | None, float | None]:
    """(instance type, USD per hour from the bundled price table) of the variant; Nones when unknown."""
    try:
        config_name = sm.describe_endpoint(EndpointName=ref.endpoint).get("EndpointConfigName")
        config = sm.describe_endpoint_config(EndpointConfigName=config_name) if config_name else {}
    except Exception as exc:
        if api_error(exc) is None:
            raise
        return None, None
    instance_type = next((v.get("InstanceType") for v in config.get("ProductionVariants") or []
                          if v.get("VariantName") == ref.variant), None)
    price = load_prices().lookup(instance_type)
    return instance_type, (price.usd_per_hour if price else None)


@dataclass
class ScalingWatch:
    """What `start_watch` found and the poller it started; `finish` writes the figures."""

    ref: VariantRef
    poller: InstancePoller
    policy: ScalingPolicy | None
    time_scale: float
    source: str
    before: ScalingSnapshot | None = None
    instance_type: str | None = None
    price_per_hour: float | None = None
    grid_epoch: float | None = None  # where the metric's periods start (the local fleet's emulated second 0)

    def stop(self) -> None:
        self.poller.stop()

    def finish(self, out: Path, *, slo_ms: float | None = None, percentile: float = DEFAULT_SLO_PERCENTILE,
               say: Say = _say) -> dict[str, object] | None:
        """Stop polling; the figures into `out`/summary.json `autoscaling` (returned). None when the
        run wrote no summary.json."""
        self.stop()
        path = out / "summary.json"
        if not path.exists():
            return None
        summary = json.loads(path.read_text())
        started_at = datetime.fromisoformat(str(Summary.of(summary).started_at).replace("Z", "+00:00")).timestamp()
        timeline = timeline_path(out)
        seconds = read_seconds(timeline) if timeline else []
        samples = self.poller.timeline(RunClock(started_at, self.time_scale))
        totals = Summary.of(summary).totals
        errors = dict(totals.errors or {}) if totals is not None else {}
        figures = autoscaling_figures(samples, seconds, started_at=started_at, policy=self.policy, slo_ms=slo_ms,
                                      percentile=percentile, price_per_hour=self.price_per_hour, failures=errors,
                                      time_scale=self.time_scale, source=self.source, grid_epoch=self.grid_epoch)
        figures["watched"] = {
            "resource_id": self.ref.resource_id, "instance_type": self.instance_type,
            "scaling": self.before.describe() if self.before else None,
            "scaling_before": self.before.as_dict() if self.before else None,
            "readings": len(self.poller.readings), "failed_readings": self.poller.errors,
            "every_s": POLL_EVERY_S,
        }
        summary["autoscaling"] = figures
        write_json(path, summary)
        record = Autoscaling.of(figures)
        for event in record.scale_events:
            say(describe_event(event))
        say(result_line(record))
        if self.poller.errors:
            say(f"{self.poller.errors} DescribeEndpoint reading(s) failed (last: {self.poller.last_error})")
        return figures


def result_line(figures: Autoscaling) -> str:
    """`autoscaling: 3 scale events, peak 3 instances, 0.41 instance-hours ($0.09), 40 s over the SLO, 0 flaps`."""
    text = f"autoscaling: {count(len(figures.scale_events), 'scale event')}, "
    text += f"peak {count(figures.peak_instances or 0, 'instance')}"
    text += f", {figures.instance_hours or 0:.3f} instance-hours"
    if figures.cost_usd is not None:
        text += f" (${figures.cost_usd:.2f})"
    if figures.slo_breach_s is not None:
        interval = figures.breach_s_ci95
        bounds = f" [{interval[0]:.0f}, {interval[1]:.0f}]" if interval else ""
        text += f", {figures.slo_breach_s:.0f} s{bounds} over the SLO"
        if figures.breach_client_bound_s:
            text += f" ({figures.breach_client_bound_s:.0f} s of it while the load generator was behind)"
    return text + f", {count(figures.flaps or 0, 'flap')}"


def live_lines(say: Say) -> Callable[[InstanceReading, InstanceReading], None]:
    """The poller's hook: a progress line as soon as a reading shows the counts moved."""
    def changed(before: InstanceReading, now: InstanceReading) -> None:
        line = describe_change(before.desired, before.in_service, now.desired, now.in_service)
        if line:
            say(line)
    return changed


def start_watch(settings: SageMakerSettings, *, say: Say = _say, aas=None, sm=None) -> ScalingWatch:
    """Read the variant's scaling and start polling it (before the run starts); changes nothing."""
    url = settings.endpoint_url
    if url and is_loopback(url):
        return _start_local(settings, url, say=say, sm=sm)
    if aas is None or sm is None:
        aas, sm = clients(settings.region or None, settings.aws_profile or None)
    aas, sm = read_only(aas), read_only(sm)
    ref = choose_variant(sm, settings.endpoint_name, settings.target_variant)
    try:
        before = snapshot(aas, sm, ref)
    except ScalingError as exc:
        raise UsageError(f"--watch-scaling: {exc.message}") from None
    policy = before.scaling_policy()
    instance_type, price = instance_price(sm, ref)
    say(f"watching the scaling of {before.describe()}"
        + (f" on {instance_type}" if instance_type else "")
        + ("" if policy else "; no single target-tracking policy to time reactions against (reaction_s left empty)"))
    poller = InstancePoller(sm, ref, on_change=live_lines(say)).start()
    return ScalingWatch(ref, poller, policy, 1.0, "DescribeEndpoint", before, instance_type, price)


def _start_local(settings: SageMakerSettings, url: str, *, say: Say, sm=None) -> ScalingWatch:
    info = local_fleet(url)
    if info is None:
        raise UsageError(f"--watch-scaling: the endpoint at {url} is not a local fleet (no {LOCAL_ROUTE}); start one "
                         "with `sm-locust serve --instances N ...`, or watch a SageMaker endpoint")
    if sm is None:  # the local fleet checks no signature: placeholders when there are no credentials
        sm = client("sagemaker", Purpose.CONTROL, region=settings.region, profile=settings.aws_profile,
                    endpoint_url=url, default_region=LOCAL_DEFAULT_REGION)
    sm = read_only(sm)
    ref = choose_variant(sm, settings.endpoint_name, settings.target_variant)
    log = FleetLog.of(info)
    policy = ScalingPolicy(**log.policy).check() if log.policy else None
    time_scale = float(log.time_scale or 1.0)
    say(f"watching the scaling of the local fleet at {url} ({ref.resource_id}"
        + (f", {policy.describe()}" if policy else "") + f", time scale {time_scale:g})")
    poller = InstancePoller(sm, ref, time_scale=time_scale, on_change=live_lines(say)).start()
    return ScalingWatch(ref, poller, policy, time_scale, "local fleet (DescribeEndpoint)",
                        grid_epoch=log.started_at)
