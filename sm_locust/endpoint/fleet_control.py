"""The fleet emulation's control loop, in the gunicorn master: Application Auto Scaling for the local variant.

One thread turns the requests the variant received into one datapoint per period (emulated seconds,
by AWS's definitions, docs/facts.md; a period with no request is no data), feeds
`scaling.policy.TargetTracking`, applies its decisions to the shared instance table and keeps the
emulator's log (what `/_sm_locust/scaling` and DescribeEndpoint answer from). With
`--cloudwatch-url` each emulated minute is published, stamped with emulated time; instance counts go
under `sm-locust/Endpoints` (SageMaker publishes no such metric). A failed publication is one
warning. `FleetController.tick()` is one step from the clock; `start()` runs it on a daemon thread.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime

from sm_locust.endpoint.fleet import FleetConfig, SharedFleet
from sm_locust.endpoint.metrics import endpoint_name_for, make_client
from sm_locust.scaling.policy import CONCURRENCY, IN, ScaleDecision, TargetTracking
from sm_locust.scaling.timeline import InstanceSample, MetricPeriod

TICK_S = 0.01  # the controller looks at the clock this often (real seconds) at most
MINUTE_S = 60.0
FLEET_NAMESPACE = "sm-locust/Endpoints"

log = logging.getLogger(__name__)


class FleetController:
    """Datapoints per period, the target-tracking loop, the log and (optionally) CloudWatch."""

    def __init__(self, config: FleetConfig, fleet: SharedFleet, *, cloudwatch=None, endpoint_name: str = "",
                 variant_name: str = "AllTraffic", say=print):
        self.config = config
        self.fleet = fleet
        self.policy = config.policy
        self.loop = (TargetTracking(self.policy, config.instances, config.instance_start_s)
                     if self.policy is not None else None)
        self.period_s = self.policy.spec.period_s if self.policy is not None else MINUTE_S
        self.cloudwatch = cloudwatch
        self.endpoint_name = endpoint_name
        self.variant_name = variant_name
        self.say = say
        self._period_index = 0
        self._minute_index = 0
        self._arrivals_mark = fleet.arrivals()
        self._minute_mark = self._arrivals_mark
        self._samples: list[tuple[float, float]] = []  # (in flight, in service) this period
        self._pending: list[ScaleDecision] = []  # scale-outs whose instances are not serving yet
        self._logged = (config.instances, config.instances)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = False

    # -- one step -------------------------------------------------------------------------------
    def tick(self) -> None:
        now = self.fleet.now_s()
        self._log_ready(now)
        serving = len(self.fleet.serving(now))
        self._samples.append((self.fleet.in_flight(), serving))
        while now >= (self._period_index + 1) * self.period_s - 1e-9:
            self._close_period(self._period_index * self.period_s)
            self._period_index += 1
        while now >= (self._minute_index + 1) * MINUTE_S - 1e-9:
            self._publish_minute(self._minute_index * MINUTE_S)
            self._minute_index += 1

    def _close_period(self, start_s: float) -> None:
        arrivals, weight = self.fleet.arrivals()
        count = arrivals - self._arrivals_mark[0]
        weight_sum = weight - self._arrivals_mark[1]
        self._arrivals_mark = (arrivals, weight)
        samples, self._samples = self._samples, []
        serving = sum(s for _, s in samples) / len(samples) if samples else float(self.fleet.counts(start_s)[1])
        real_period = self.period_s / self.config.time_scale
        if self.policy is not None and self.policy.metric == CONCURRENCY:
            in_flight = sum(f / max(1, s) for f, s in samples) / len(samples) if samples else 0.0
            value = in_flight if (count or in_flight) else None
        else:
            value = weight_sum * 60.0 / real_period if count else None
        period = MetricPeriod(start_s, value)
        self.fleet.log_period(period)
        if self.loop is not None:
            decision = self.loop.observe(start_s, value, serving)
            if decision is not None:
                self._apply(decision)

    def _apply(self, decision: ScaleDecision) -> None:
        self.fleet.set_desired(decision.to_count, decision.ready_s)
        if decision.direction == IN or decision.ready_s <= decision.t_s:
            self._log(InstanceSample(decision.t_s, decision.to_count, decision.to_count))
        else:
            self._log(InstanceSample(decision.t_s, decision.to_count, self._logged[1]))
            self._pending.append(decision)
        self.say(f"sm-locust endpoint: {decision.describe(self.policy.spec if self.policy else None)}")

    def _log_ready(self, now: float) -> None:
        """Log the in-service change of scale-outs whose instances serve by now, at their exact time."""
        while self._pending and self._pending[0].ready_s <= now + 1e-9:
            decision = self._pending.pop(0)
            desired = self.fleet.desired()
            self._log(InstanceSample(decision.ready_s, desired, len(self.fleet.serving(decision.ready_s))))

    def _log(self, sample: InstanceSample) -> None:
        if (sample.desired, sample.in_service) != self._logged:
            self.fleet.log_event(sample)
            self._logged = (sample.desired, sample.in_service)

    # -- CloudWatch -----------------------------------------------------------------------------
    def _publish_minute(self, start_s: float) -> None:
        arrivals, weight = self.fleet.arrivals()
        count, per_instance = arrivals - self._minute_mark[0], weight - self._minute_mark[1]
        self._minute_mark = (arrivals, weight)
        if self.cloudwatch is None:
            return
        scale = self.config.time_scale  # real requests in a compressed minute -> the per-minute rate
        desired, serving = self.fleet.counts(start_s + MINUTE_S)
        stamp = datetime.fromtimestamp(self.fleet.started_epoch + start_s, UTC)
        dims = [{"Name": "EndpointName", "Value": self.endpoint_name},
                {"Name": "VariantName", "Value": self.variant_name}]

        def datum(name: str, value: float) -> dict:
            return {"MetricName": name, "Dimensions": dims, "Timestamp": stamp, "Unit": "None", "Value": float(value)}

        try:
            if count:
                self.cloudwatch.put_metric_data(Namespace="AWS/SageMaker", MetricData=[
                    datum("Invocations", count * scale), datum("InvocationsPerInstance", per_instance * scale)])
            self.cloudwatch.put_metric_data(Namespace=FLEET_NAMESPACE, MetricData=[
                datum("DesiredInstanceCount", desired), datum("CurrentInstanceCount", serving)])
            if self._failing:
                self._failing = False
                log.warning("sm-locust endpoint: fleet metrics published again")
        except Exception as exc:  # noqa: BLE001 - a metrics failure must never stop the endpoint
            if not self._failing:
                self._failing = True
                log.warning("sm-locust endpoint: fleet metrics not published (%s: %s); serving goes on",
                            type(exc).__name__, str(exc).splitlines()[0][:200] if str(exc) else "")

    # -- the thread -------------------------------------------------------------------------------
    def _run(self) -> None:
        wait = min(TICK_S, self.period_s / self.config.time_scale / 20.0)
        while not self._stop.wait(wait):
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - the loop must outlive one bad step; the log says what
                log.exception("sm-locust endpoint: fleet control step failed")

    def begin(self) -> FleetController:
        """Emulated second 0 is now (the shared table and log start over); a minimum above
        --instances is applied at once, as registering the scalable target does."""
        self.fleet.reset()
        self._arrivals_mark = self._minute_mark = self.fleet.arrivals()
        if self.loop is not None:
            for decision in self.loop.decisions:
                self._apply(decision)
        return self

    def start(self) -> FleetController:
        if self._thread is None:
            self.begin()
            self._thread = threading.Thread(target=self._run, name="sm-locust-fleet", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def controller_for(config, fleet: SharedFleet | None, cloudwatch=None) -> FleetController | None:
    """The controller `serve_forever` starts in the master when the fleet emulation is on."""
    if fleet is None:
        return None

    if cloudwatch is None and getattr(config, "cloudwatch_url", None):
        cloudwatch = make_client(config.cloudwatch_url)
    return FleetController(config.fleet, fleet, cloudwatch=cloudwatch, endpoint_name=endpoint_name_for(config),
                           variant_name=config.variant_name)
