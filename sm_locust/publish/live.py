"""`LivePublisher`: the Locust side of `--publish` and `--dashboard`, on the master or local runner only.

Figures come from the master's merged stats (`counted_entry`, `RunRecorder.totals`, `LlmStats`);
workers publish nothing, so nothing counts twice, and each period is the difference of two
cumulative readings (`publish.interval`), so periods add up to the run's totals. At init the
destination is checked with one real call (PutMetricData of `Requests` = 0, PutDashboard) or the
/metrics server starts; a refusal is one line, exit 2. From test_start a 1-s ticker closes periods
on the period grid and a sender greenlet does all I/O (`publish.sender`), so the load never waits.
At quit the last reports go out, the sender gets `CLOSE_TIMEOUT_S`, and summary.json records
`publish` (docs/live-metrics.md).
"""

from __future__ import annotations

import logging
import sys
import time
from collections import deque
from datetime import UTC, datetime
from typing import Any

import gevent
from gevent.event import Event
from locust.runners import WorkerRunner

from sm_locust.aws.clients import AwsClient, Purpose, client
from sm_locust.config.endpoint import SageMakerSettings
from sm_locust.config.options import environment_options
from sm_locust.errors import SmLocustError, UsageError
from sm_locust.plateau.tokens import merged
from sm_locust.publish.dashboard import console_url, dashboard_body, put_dashboard
from sm_locust.publish.error_names import ErrorNames
from sm_locust.publish.interval import Totals, difference
from sm_locust.publish.metric_data import TARGET_DIMENSIONS, interval_datums, run_dimensions
from sm_locust.publish.options import PublishSettings
from sm_locust.publish.prometheus import RunView, serve
from sm_locust.publish.sender import RETRY, THROTTLE, CloudWatchSender, classify, describe
from sm_locust.record.llm import LlmStats
from sm_locust.record.recorder import RunRecorder, counted_entry

log = logging.getLogger(__name__)
CLOSE_TIMEOUT_S = 30.0
IN_FLIGHT_WINDOW_S = 10
PUBLISH_KEY = "publish"  # summary.json
CONNECT_TIMEOUT_S = 5
READ_TIMEOUT_S = 15


def cloudwatch_client(settings: SageMakerSettings) -> AwsClient:
    """A CloudWatch client by the usual chain (--aws-profile, the environment, the role) in the one
    region rule's region; AWS_ENDPOINT_URL_CLOUDWATCH aims it elsewhere (a moto stand-in). botocore's
    own retries are off: the sender backs off and counts every retry itself."""
    return client("cloudwatch", Purpose.PUBLISH, region=settings.region, profile=settings.aws_profile,
                  default_region="us-east-1", connect_timeout=CONNECT_TIMEOUT_S, read_timeout=READ_TIMEOUT_S)


def grid(t: float, period_s: int) -> float:
    """The start of the period `t` falls in (periods start on multiples of the period, UTC)."""
    return float(int(t // period_s) * period_s)


def say(text: str) -> None:
    print(f"sm-locust: {text}", flush=True)


class LivePublisher:
    """Registers its own listeners on `environment.events`; attach with `attach_publisher`."""

    def __init__(self, environment: Any, settings: PublishSettings, endpoint: SageMakerSettings,
                 recorder: RunRecorder, *, cloudwatch: AwsClient = None, close_timeout_s: float = CLOSE_TIMEOUT_S):
        self.environment = environment
        self.settings = settings
        self.endpoint = endpoint
        self.recorder = recorder
        self.close_timeout_s = close_timeout_s
        self.llm = LlmStats.for_environment(environment)
        self.sender: CloudWatchSender | None = None
        self.server: Any = None
        self.dashboard: str | None = None
        self.dims: list[dict] = []
        self.error_names = ErrorNames(on_fold=lambda text: log.warning("sm-locust: CloudWatch: %s", text))
        self._last: Totals | None = None
        self._period_start = 0.0
        self._last_period_start = 0.0
        self._ticker: Any = None
        self._sending: Any = None
        self._wake = Event()
        self._stop = Event()
        self._ring: deque[tuple[float, float]] = deque(maxlen=IN_FLIGHT_WINDOW_S + 1)
        self._closed = False
        if settings.cloudwatch:
            client = cloudwatch if cloudwatch is not None else cloudwatch_client(endpoint)
            self.sender = CloudWatchSender(client, settings.namespace, sleep=gevent.sleep)
        events = environment.events
        events.test_start.add_listener(self.on_test_start)
        events.test_stop.add_listener(self.on_test_stop)
        events.quit.add_listener(self.on_quit)

    # -- init: the checks -------------------------------------------------------------------------
    def start(self) -> LivePublisher:
        """The checks before the run (module docstring); UsageError when one fails."""
        name = self.endpoint.endpoint_name
        if self.sender is not None and name:
            self.dims = self._dimensions(self.endpoint)
            self._check_permission()
        if self.settings.dashboard:
            if not name:
                raise UsageError("--dashboard needs the endpoint's name at start: pass --endpoint-name")
            self._put_dashboard(name)
        if self.settings.prometheus is not None:
            host, port = self.settings.prometheus
            self.server = serve(self._view(), host, port)
            say(f"Prometheus metrics at http://{host}:{port}/metrics")
        return self

    def _dimensions(self, endpoint: SageMakerSettings) -> list[dict]:
        return run_dimensions(endpoint.endpoint_name, {dest: getattr(endpoint, dest) for dest, _ in TARGET_DIMENSIONS})

    def _check_permission(self) -> None:
        assert self.sender is not None
        datum = {"MetricName": "Requests", "Dimensions": self.dims, "Timestamp": datetime.now(UTC), "Unit": "Count",
                 "Value": 0.0, "StorageResolution": self.settings.storage_resolution}
        try:
            self.sender.send_now([datum])
        except Exception as exc:  # noqa: BLE001 - classified: one line, exit 2
            action, reason = classify(exc)
            if action == THROTTLE:
                log.warning("sm-locust: CloudWatch throttled the permission check (%s); publishing backs off", reason)
                return
            if action == RETRY:
                raise UsageError(f"--publish cloudwatch: cannot reach CloudWatch at "
                                 f"{self.sender.client.meta.endpoint_url} ({reason}); check the network, the region "
                                 "or AWS_ENDPOINT_URL_CLOUDWATCH") from None
            raise UsageError(f"--publish cloudwatch: PutMetricData was refused ({reason}); the run's credentials need "
                             "cloudwatch:PutMetricData (docs/live-metrics.md)") from None

    def _put_dashboard(self, endpoint_name: str) -> None:
        assert self.sender is not None
        client = self.sender.client
        region = client.meta.region_name
        name = self.settings.dashboard_name(endpoint_name) or ""
        options = environment_options(self.environment)
        body = dashboard_body(endpoint=endpoint_name, namespace=self.settings.namespace, dims=self.dims,
                              region=region, period_s=self.settings.period_s,
                              variant=self.endpoint.target_variant or None,
                              llm=bool(options.prompts or options.stream))
        for warning in put_dashboard(client, name, body):
            log.warning("sm-locust: dashboard %s: %s", name, warning)
        self.dashboard = name
        target = client.meta.endpoint_url
        if target.endswith(".amazonaws.com"):
            say(f"dashboard {name}: {console_url(region, name)}")
        else:
            say(f"dashboard {name} written to {target} (not AWS: no console URL)")

    # -- the run ----------------------------------------------------------------------------------
    def on_test_start(self, **_kw) -> None:
        now = time.time()
        self._closed = False
        options = environment_options(self.environment)
        endpoint = SageMakerSettings.from_options(options)
        if endpoint.endpoint_name:
            self.endpoint = endpoint
            self.dims = self._dimensions(endpoint)  # the web UI may name another endpoint per swarm
        self._last = self._read(now)
        self._period_start = grid(now, self.settings.period_s)
        self._ring.clear()
        self._ring.append((now, self._last.sum_ms))
        self._stop.clear()
        self.recorder.extra[PUBLISH_KEY] = self.report()  # in every summary.json write from now on
        if self._ticker is None:
            self._ticker = gevent.spawn(self._tick_forever)
        if self.sender is not None and self._sending is None:
            self._sending = gevent.spawn(self._send_forever)

    def on_test_stop(self, **_kw) -> None:
        if self._ticker is not None:
            self._ticker.kill(block=False)
            self._ticker = None
        if self._last is not None and not self._closed:
            self._close_period(time.time())
            self._closed = True

    def on_quit(self, **_kw) -> None:
        """After the recorder's last write: the remainder, the last sends, summary.json's `publish`."""
        if self._last is not None and self.sender is not None:
            final = self._read(time.time())
            interval = difference(self._last, final, self._last_period_start)
            if not interval.empty:
                self.sender.add(interval_datums(interval, self.dims, self.settings.storage_resolution,
                                                self.error_names))
            self._last = final
        if self.sender is not None:
            self._stop.set()
            self._wake.set()
            if self._sending is not None:
                self._sending.join(timeout=READ_TIMEOUT_S + CONNECT_TIMEOUT_S)
                self._sending = None
            self.sender.close(self.close_timeout_s)
            cloudwatch = self.cloudwatch_report()
            self.recorder.extra[PUBLISH_KEY] = self.publish_section(cloudwatch)
            if self.recorder.out_dir is not None:
                self.recorder.write()
            say(describe(cloudwatch or {}))
        if self.server is not None:
            self.server.shutdown()
            self.server = None

    def report(self) -> dict:
        """summary.json's `publish` (docs/live-metrics.md)."""
        return self.publish_section(self.cloudwatch_report())

    def cloudwatch_report(self) -> dict[str, object] | None:
        """summary.json's `publish.cloudwatch`, None without a CloudWatch sender."""
        if self.sender is None:
            return None
        cloudwatch = {**self.sender.report(), "dimensions": {d["Name"]: d["Value"] for d in self.dims},
                      "storage_resolution": self.settings.storage_resolution}
        if self.error_names.folded:
            cloudwatch["errors_as_other"] = self.error_names.folded
        if self.dashboard:
            cloudwatch["dashboard"] = self.dashboard
        return cloudwatch

    def publish_section(self, cloudwatch: dict[str, object] | None) -> dict:
        """summary.json's `publish` holding `cloudwatch` (cloudwatch_report)."""
        out: dict[str, Any] = {"period_s": self.settings.period_s}
        if cloudwatch is not None:
            out["cloudwatch"] = cloudwatch
        if self.settings.prometheus is not None:
            out["prometheus"] = "{}:{}".format(*self.settings.prometheus)
        return out

    # -- greenlets --------------------------------------------------------------------------------
    def _tick_forever(self) -> None:
        while True:
            gevent.sleep(1.0 - time.time() % 1.0)
            try:
                self.tick(time.time())
            except Exception:  # never let publishing touch the test
                log.exception("sm-locust: live metrics tick failed")

    def tick(self, now: float) -> None:
        """Once a second: the in-flight window; at a period's end, the period buffered (no I/O)."""
        self._ring.append((now, counted_entry(self.environment.runner.stats).total_response_time))
        if self.sender is not None and now >= self._period_start + self.settings.period_s:
            self._close_period(now)

    def _close_period(self, now: float) -> None:
        """Buffer the period under way (stamped with its start) and open the next one."""
        assert self._last is not None
        totals = self._read(now)
        if self.sender is not None:
            interval = difference(self._last, totals, self._period_start)
            self.sender.add(interval_datums(interval, self.dims, self.settings.storage_resolution, self.error_names))
            self.recorder.extra[PUBLISH_KEY] = self.report()  # the checkpoints carry it too
            self._wake.set()
        self._last = totals
        self._last_period_start = self._period_start
        self._period_start = grid(now, self.settings.period_s)

    def _send_forever(self) -> None:
        assert self.sender is not None
        while not self._stop.is_set():
            self._wake.wait()
            self._wake.clear()
            try:
                self.sender.drain(stop=self._stop.is_set, sleep=lambda s: self._stop.wait(s))
            except Exception:  # never let publishing touch the test
                log.exception("sm-locust: publishing to CloudWatch failed")

    # -- reading the run --------------------------------------------------------------------------
    def _read(self, now: float) -> Totals:
        total = counted_entry(self.environment.runner.stats)
        llm = self.llm
        buckets = [*llm.coarse.values(), *llm.buckets.values()]
        count = total.num_requests
        return Totals(t=now, requests=count, failures=total.num_failures, hist=dict(total.response_times),
                      sum_ms=float(total.total_response_time),
                      max_ms=float(total.max_response_time) if count else None,
                      min_ms=float(total.min_response_time) if count and total.min_response_time is not None else None,
                      errors=self.recorder.totals()[1], llm=merged(buckets) if buckets else None)

    def in_flight(self) -> float:
        """Mean requests in flight over the last 10 s: latency-seconds completed per second (Little's law)."""
        if len(self._ring) < 2:
            return 0.0
        (t0, s0), (t1, s1) = self._ring[0], self._ring[-1]
        return max(0.0, (s1 - s0) / 1000.0 / (t1 - t0)) if t1 > t0 else 0.0

    def _view(self) -> RunView:
        runner = self.environment.runner
        llm = self.llm

        def llm_totals():
            buckets = [*llm.coarse.values(), *llm.buckets.values()]
            return merged(buckets) if buckets else None

        return RunView(stats=lambda: runner.stats, endpoint=lambda: self.recorder.endpoint or "",
                       users=lambda: runner.user_count, step=lambda: self.recorder.timeline.step_index,
                       in_flight=self.in_flight, llm=llm_totals)


def attach_publisher(environment: Any, recorder: RunRecorder | None, *,
                     cloudwatch: AwsClient = None) -> LivePublisher | None:
    """On the master or local runner, when the options publish anything: the publisher, checked
    (init). A failed check is one line on stderr and exit 2, before any user starts."""
    if isinstance(environment.runner, WorkerRunner) or environment.parsed_options is None or recorder is None:
        return None
    options = environment_options(environment)
    try:
        settings = PublishSettings.from_options(options).validate()
        if not settings.active:
            return None
        endpoint = SageMakerSettings.from_options(options)
        publisher = LivePublisher(environment, settings, endpoint, recorder, cloudwatch=cloudwatch).start()
    except SmLocustError as exc:
        print(f"sm-locust: error: {exc.message}", file=sys.stderr, flush=True)
        environment.process_exit_code = exc.exit_code
        raise SystemExit(exc.exit_code) from None
    environment.sm_locust_publisher = publisher
    return publisher
