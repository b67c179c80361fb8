"""Live metrics, the pure parts: options, periods as differences, datums and calls within
PutMetricData's limits, the sender's buffer / back-off / account (a 30-s throttle on a fake clock, and
through botocore's own Stubber), the dashboard body, and the Prometheus collector on synthetic stats."""

from __future__ import annotations

import argparse
import json
import random

import locust  # noqa: F401  (gevent patching before boto3)
from locust.stats import RequestStats, bucket_response_time

import boto3
import pytest
from botocore.stub import Stubber

from sm_locust.config.options import OptionSpec, parse_options
from sm_locust.errors import UsageError
from sm_locust.invocation import InvocationError
from sm_locust.plateau.tokens import Bucket
from sm_locust.publish.dashboard import dashboard_body
from sm_locust.publish.interval import Totals, difference, latency_values
from sm_locust.publish.metric_data import (
    MAX_VALUES_PER_DATUM,
    calls,
    datum_key,
    interval_datums,
    run_dimensions,
)
from sm_locust.publish.options import OPTIONS, PublishSettings, parse_destinations
from sm_locust.publish.prometheus import METRIC_NAMES, RunCollector, RunView, cumulative_buckets
from sm_locust.publish.sender import BUFFER_FULL, NO_ANSWER, UNSENT_AT_END, CloudWatchSender, backoff_s, describe

DIMS = run_dimensions("ep", {})


# -- options ------------------------------------------------------------------------------------------

def test_destinations_parse_to_one_canonical_text():
    assert parse_destinations("cloudwatch") == "cloudwatch"
    assert parse_destinations("prometheus") == "prometheus:127.0.0.1:9646"
    assert parse_destinations("prometheus:9000, CloudWatch") == "cloudwatch,prometheus:127.0.0.1:9000"
    assert parse_destinations("prometheus:0.0.0.0:9646") == "prometheus:0.0.0.0:9646"
    for bad in ("datadog", "prometheus:0", "prometheus:host:99999", "cloudwatch:x", ",", "prometheus,prometheus:1"):
        with pytest.raises(UsageError):
            parse_destinations(bad)


def test_publish_options_are_ranged_by_their_specs_and_kept_out_of_the_web_ui():
    assert all(not spec.web_ui for spec in OPTIONS)  # each decides where data goes
    options = parse_options({"publish": "cloudwatch", "publish_period": "10"})
    settings = PublishSettings.from_options(options).validate()
    assert (settings.cloudwatch, settings.prometheus, settings.period_s, settings.storage_resolution) == (
        True, None, 10, 1)
    assert PublishSettings.from_options(parse_options({"publish": "cloudwatch"})).storage_resolution == 60
    for bad in ({"publish_period": "7"}, {"publish_namespace": "AWS/SageMaker"}, {"dashboard": "a b"},
                {"publish": "nowhere"}):
        with pytest.raises(UsageError) as info:
            parse_options(bad)
        assert "--" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(UsageError, match="add --publish cloudwatch"):
        PublishSettings.from_options(parse_options({"dashboard": "auto"})).validate()


def test_dashboard_flag_alone_names_it_after_the_endpoint_without_overwriting_the_endpoints_own():
    spec = next(s for s in OPTIONS if s.flag == "--dashboard")
    parser = argparse.ArgumentParser()
    parser.add_argument(spec.flag, **spec.argparse_kwargs())
    assert parser.parse_args(["--dashboard"]).dashboard == "auto"
    assert parser.parse_args(["--dashboard", "team-board"]).dashboard == "team-board"
    assert not parser.parse_args([]).dashboard  # not given (argparse runs the default through the spec: None)
    settings = PublishSettings(cloudwatch=True, dashboard="auto")
    assert settings.dashboard_name("my-endpoint") == "sm-locust-my-endpoint"
    assert PublishSettings(cloudwatch=True, dashboard="x_1").dashboard_name("e") == "x_1"
    assert OptionSpec("--x", "X", "", "").argparse_kwargs().get("nargs") is None  # other options unchanged


def test_dimensions_only_for_what_the_run_fixes():
    assert run_dimensions("ep", {"target_variant": "", "target_model": ""}) == [{"Name": "EndpointName", "Value": "ep"}]
    assert run_dimensions("ep", {"target_variant": "blue", "inference_component": "ic-1"}) == [
        {"Name": "EndpointName", "Value": "ep"}, {"Name": "VariantName", "Value": "blue"},
        {"Name": "InferenceComponentName", "Value": "ic-1"}]


# -- periods ------------------------------------------------------------------------------------------

def synthetic_run(seed: int, periods: int = 12):
    """Cumulative readings of a run with random latencies and errors: what the master's stats hold."""
    rng = random.Random(seed)
    hist: dict[int, int] = {}
    errors: dict[str, int] = {}
    requests = failures = 0
    total = 0.0
    hi = lo = None
    readings = [Totals(t=1000.0)]
    exact: list[float] = []
    for p in range(periods):
        for _ in range(rng.randint(0, 400)):
            ms = rng.lognormvariate(3.5, 0.6)
            exact.append(ms)
            key = bucket_response_time(ms)  # Locust's own rounding into its histogram
            hist[key] = hist.get(key, 0) + 1
            requests += 1
            total += ms
            hi = ms if hi is None else max(hi, ms)
            lo = ms if lo is None else min(lo, ms)
            if rng.random() < 0.05:
                code = rng.choice(["ThrottlingException", "ModelError"])
                errors[code] = errors.get(code, 0) + 1
                failures += 1
        readings.append(Totals(t=1000.0 + 10 * (p + 1), requests=requests, failures=failures, hist=dict(hist),
                               sum_ms=total, max_ms=hi, min_ms=lo, errors=dict(errors)))
    return readings, exact


@pytest.mark.parametrize("seed", range(5))
def test_periods_add_up_to_the_last_reading_and_keep_the_exact_extremes(seed):
    readings, exact = synthetic_run(seed)
    intervals = [difference(a, b, start=a.t) for a, b in zip(readings, readings[1:], strict=False)]
    final = readings[-1]
    assert sum(i.requests for i in intervals) == final.requests
    assert sum(i.failures for i in intervals) == final.failures
    by_code: dict[str, int] = {}
    for i in intervals:
        for code, n in i.errors.items():
            by_code[code] = by_code.get(code, 0) + n
    assert by_code == final.errors
    assert sum(i.throttles for i in intervals) == final.errors.get("ThrottlingException", 0)
    pairs = [p for i in intervals for p in latency_values(i.hist, run_max=i.run_max_ms, run_min=i.run_min_ms,
                                                           new_max=i.new_max_ms, new_min=i.new_min_ms)]
    assert sum(c for _, c in pairs) == final.requests  # CloudWatch's SampleCount
    assert max(v for v, _ in pairs) == max(exact)  # Maximum: exact, not Locust's rounded bucket
    assert min(v for v, _ in pairs) == min(exact)
    mean = sum(v * c for v, c in pairs) / final.requests
    assert mean == pytest.approx(sum(exact) / len(exact), rel=0.02)  # Sum / SampleCount
    assert sum(i.sum_ms for i in intervals) == pytest.approx(final.sum_ms)


def test_a_late_worker_report_lands_in_the_next_period_not_twice():
    a = Totals(t=0, requests=10, hist={20: 10}, sum_ms=200.0, max_ms=25.0, min_ms=15.0)
    b = Totals(t=10, requests=10, hist={20: 10}, sum_ms=200.0, max_ms=25.0, min_ms=15.0)  # nothing arrived
    c = Totals(t=20, requests=16, hist={20: 14, 30: 2}, sum_ms=330.0, max_ms=31.0, min_ms=15.0)  # two reports at once
    first, second = difference(a, b, 0), difference(b, c, 10)
    assert first.empty and first.requests == 0
    assert second.requests == 6 and second.hist == {20: 4, 30: 2} and second.new_max_ms == 31.0
    assert second.in_flight == pytest.approx(130.0 / 1000 / 10)  # Little's law over the interval


def test_llm_buckets_are_differenced_too():
    before = Bucket(requests=2, output_tokens=40, hists={"ttft": {1200: 2}, "itl": {150: 30}})
    after = Bucket(requests=5, output_tokens=100, hists={"ttft": {1200: 3, 1500: 2}, "itl": {150: 70, 200: 5}})
    interval = difference(Totals(t=0, llm=before), Totals(t=10, llm=after), 0)
    assert interval.llm is not None and interval.llm.requests == 3 and interval.llm.output_tokens == 60
    datums = {d["MetricName"]: d for d in interval_datums(interval, DIMS, 1)}
    assert datums["TimeToFirstToken"]["Values"] == [120.0, 150.0] and datums["TimeToFirstToken"]["Counts"] == [1, 2]
    assert sum(datums["InterTokenLatency"]["Counts"]) == 45 and datums["OutputTokens"]["Value"] == 60


# -- datums and calls ------------------------------------------------------------------------------------

def test_datums_stay_within_150_values_and_calls_within_the_limits():
    hist = {k: 1 + k % 3 for k in range(400)}  # 400 distinct latencies in one period
    interval = difference(Totals(t=0), Totals(t=10, requests=sum(hist.values()), failures=3, hist=hist,
                                              sum_ms=float(sum(k * n for k, n in hist.items())), max_ms=399.0,
                                              min_ms=0.0, errors={"ModelError": 2, "ThrottlingException": 1}), 0)
    datums = interval_datums(interval, DIMS, 1)
    latency = [d for d in datums if d["MetricName"] == "EndToEndLatency"]
    assert len(latency) == 3 and all(len(d["Values"]) <= MAX_VALUES_PER_DATUM for d in latency)
    assert sum(sum(d["Counts"]) for d in latency) == interval.requests
    assert all(d["StorageResolution"] == 1 and d["Unit"] == "Milliseconds" for d in latency)
    failures = {tuple(x["Value"] for x in d["Dimensions"][1:]): d["Value"] for d in datums
                if d["MetricName"] == "Failures"}
    assert failures == {(): 3.0, ("ModelError",): 2.0, ("ThrottlingException",): 1.0}
    assert next(d["Value"] for d in datums if d["MetricName"] == "Throttles") == 1.0
    grouped = calls(datums * 400)
    assert sum(len(c) for c in grouped) == len(datums) * 400
    for call in grouped:
        assert len(call) <= 1000
        assert len({datum_key(d) for d in call}) == len(call)  # never the same data point twice in a call
        assert len(json.dumps(call, default=str)) < 1_000_000


# -- the sender ---------------------------------------------------------------------------------------

class ThrottledFor:
    """A CloudWatch stand-in that answers Throttling until `until` on the test's clock, then stores."""

    def __init__(self, clock, until: float, code: str = "Throttling"):
        self.clock, self.until, self.code = clock, until, code
        self.stored: list[dict] = []
        self.attempts = 0

    def put_metric_data(self, Namespace, MetricData):  # noqa: N803 - boto3's keyword names
        self.attempts += 1
        if self.clock.now < self.until:
            raise FakeClientError(self.code, 400)
        self.stored.extend(MetricData)


class FakeClientError(Exception):
    def __init__(self, code: str, status: int, message: str = "Rate exceeded"):
        super().__init__(f"{code}: {message}")
        self.response = {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def period_datums(n: int, start: float) -> list[dict]:
    interval = difference(Totals(t=start), Totals(t=start + 10, requests=n, hist={20: n}, sum_ms=20.0 * n,
                                                  max_ms=20.0, min_ms=20.0), start)
    return interval_datums(interval, DIMS, 1)


def test_thirty_seconds_of_throttling_loses_nothing_that_fits_the_buffer():
    clock = Clock()
    cloudwatch = ThrottledFor(clock, until=30.0)
    sender = CloudWatchSender(cloudwatch, "sm-locust", sleep=clock.sleep, clock=clock, rand=lambda: 0.5)
    sent = []
    for p in range(6):  # six 10-s periods arrive while CloudWatch throttles
        sent += period_datums(100 + p, p * 10.0)
        sender.add(sent[-len(period_datums(1, 0)):])
    sender.drain()
    assert clock.now >= 30.0
    assert cloudwatch.stored == sent  # everything, once, in order
    assert sender.retries == cloudwatch.attempts - sender.calls > 0
    report = sender.report()
    assert report["dropped"] == 0 and report["periods_sent"] == report["periods"] == 6
    assert report["published"]["requests"] == sum(100 + p for p in range(6))
    assert list(report["published"]) == ["requests", "failures", "errors", "latency_count", "latency_sum_ms",
                                         "latency_max_ms"]  # summary.json's order, as the dict accumulator wrote it
    assert "nothing dropped" in describe(report)


def test_what_does_not_fit_or_is_still_throttled_at_the_end_is_reported_with_why():
    clock = Clock()
    cloudwatch = ThrottledFor(clock, until=1e9)  # throttled for good
    per_period = len(period_datums(1, 0))
    sender = CloudWatchSender(cloudwatch, "sm-locust", capacity=3 * per_period, sleep=clock.sleep, clock=clock)
    for p in range(5):
        sender.add(period_datums(10, p * 10.0))
    assert sender.pending == 3 * per_period  # the two oldest periods went
    sender.close(timeout=30.0)
    report = sender.report()
    assert report["dropped_reasons"] == {BUFFER_FULL: 2 * per_period, UNSENT_AT_END: 3 * per_period}
    assert report["dropped"] == 5 * per_period and report["data_points"] == 0 and report["periods_sent"] == 0
    assert clock.now == pytest.approx(30.0)  # close keeps its timeout
    line = describe(report)
    assert "DROPPED" in line and BUFFER_FULL in line and UNSENT_AT_END in line


def test_a_rejected_call_is_dropped_under_its_code_and_a_call_without_answer_is_not_re_sent():
    class Rejecting:
        def __init__(self):
            self.calls = 0

        def put_metric_data(self, Namespace, MetricData):  # noqa: N803
            self.calls += 1
            if self.calls == 1:
                raise FakeClientError("InvalidParameterValue", 400, "The value NaN is invalid")
            raise type("ReadTimeoutError", (Exception,), {})("read timed out")

    clock = Clock()
    sender = CloudWatchSender(Rejecting(), "ns", sleep=clock.sleep, clock=clock)
    sender.add(period_datums(5, 0))
    sender.drain()
    sender.add(period_datums(5, 10))
    sender.drain()
    reasons = sender.report()["dropped_reasons"]
    assert set(reasons) == {"InvalidParameterValue: The value NaN is invalid", NO_ANSWER}
    assert sender.retries == 0 and sender.pending == 0


def test_backoff_doubles_with_jitter_up_to_its_cap():
    assert [backoff_s(n, lambda: 1.0) for n in (1, 2, 3, 6, 9)] == [1.0, 2.0, 4.0, 20.0, 20.0]
    assert backoff_s(3, lambda: 0.0) == 2.0


def test_the_real_botocore_client_throttled_then_accepting_through_stubber():
    client = boto3.client("cloudwatch", region_name="us-east-1")
    datums = period_datums(7, 0)
    with Stubber(client) as stub:
        for _ in range(3):
            stub.add_client_error("put_metric_data", service_error_code="Throttling", service_message="Rate exceeded",
                                  http_status_code=400)
        stub.add_response("put_metric_data", {}, {"Namespace": "sm-locust", "MetricData": datums})
        clock = Clock()
        sender = CloudWatchSender(client, "sm-locust", sleep=clock.sleep, clock=clock, rand=lambda: 1.0)
        sender.add(datums)
        sender.drain()
        stub.assert_no_pending_responses()
    assert (sender.retries, sender.calls, sender.data_points, clock.now) == (3, 1, len(datums), 1.0 + 2.0 + 4.0)


# -- the dashboard ------------------------------------------------------------------------------------

def test_dashboard_puts_the_clients_latency_beside_the_endpoints_in_one_unit():
    body = dashboard_body(endpoint="ep", namespace="sm-locust", dims=DIMS, region="eu-west-1", period_s=10,
                          variant="AllTraffic")
    text = json.dumps(body)
    assert "AWS/SageMaker" in text and "ModelLatency" in text and "EndToEndLatency" in text
    latency = body["widgets"][0]["properties"]["metrics"]
    expressions = [m[0]["expression"] for m in latency if isinstance(m[0], dict)]
    assert expressions == ["model_us/1000", "overhead_us/1000"]  # microseconds -> ms, labelled so
    hidden = [m for m in latency if not isinstance(m[0], dict) and m[0] == "AWS/SageMaker"]
    assert all(m[-1]["visible"] is False and "(µs)" in m[-1]["label"] for m in hidden)
    assert [m[-1]["stat"] for m in latency if m[0] == "sm-locust"] == ["p50", "p99"]
    names = {m[1] for w in body["widgets"] if w["type"] == "metric" for m in w["properties"]["metrics"]
             if not isinstance(m[0], dict)}
    assert {"Invocations", "Requests", "Failures", "Invocation5XXErrors", "CPUUtilization", "GPUUtilization",
            "MemoryUtilization", "InvocationsPerInstance"} <= names
    search = dashboard_body(endpoint="ep", namespace="ns", dims=DIMS, region="eu-west-1", period_s=60)
    assert "SEARCH('{AWS/SageMaker,EndpointName,VariantName} MetricName=\\\"ModelLatency\\\"" in json.dumps(search)


# -- Prometheus ---------------------------------------------------------------------------------------

def test_a_scrape_of_synthetic_stats_equals_their_totals():
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    stats = RequestStats()
    for ms in (12.0, 48.0, 230.0, 1200.0):
        stats.log_request("InvokeEndpoint", "ep", ms, 10)
    stats.log_request("TTFT", "ep", 5.0, 0)  # a latency series: not a request
    stats.log_request("InvokeEndpoint", "ep/v2", 30.0, 10)
    stats.log_error("InvokeEndpoint", "ep/v2", InvocationError("ModelError", "boom"))
    stats.log_request("InvokeEndpoint", "ep/v2", 31.0, 10)
    stats.log_error("InvokeEndpoint", "ep/v2", InvocationError("ModelError", "boom"))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RunCollector(RunView(stats=lambda: stats, endpoint=lambda: "ep", users=lambda: 4,
                                           step=lambda: 2, in_flight=lambda: 1.5, llm=lambda: None)))
    samples = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    assert all(name in METRIC_NAMES for name, _ in samples)
    requests = {dict(k)["name"]: v for (n, k), v in samples.items() if n == "sm_locust_requests_total"}
    assert requests == {"ep": 4.0, "ep/v2": 2.0}
    assert {dict(k)["error"]: v for (n, k), v in samples.items() if n == "sm_locust_failures_total"} == {
        "ModelError": 2.0}
    count = {dict(k)["name"]: v for (n, k), v in samples.items() if n == "sm_locust_request_latency_seconds_count"}
    assert count == requests
    buckets = {dict(k)["le"]: v for (n, k), v in samples.items()
               if n == "sm_locust_request_latency_seconds_bucket" and dict(k)["name"] == "ep"}
    assert (buckets["0.025"], buckets["0.05"], buckets["0.25"], buckets["1.0"], buckets["2.5"], buckets["+Inf"]) == (
        1.0, 2.0, 3.0, 3.0, 4.0, 4.0)
    assert samples[("sm_locust_users", (("endpoint", "ep"),))] == 4.0
    assert samples[("sm_locust_step", (("endpoint", "ep"),))] == 2.0
    assert cumulative_buckets({1200: 2}, (0.1, 0.2), scale_ms=0.1) == [("0.1", 0.0), ("0.2", 2.0), ("+Inf", 2.0)]


# -- the permission check before a run ----------------------------------------------------------------

def test_a_missing_put_metric_data_permission_is_a_usage_error_naming_it():
    from locust.env import Environment

    from sm_locust.config.endpoint import SageMakerSettings
    from sm_locust.publish.live import LivePublisher
    from sm_locust.record.recorder import RunRecorder

    client = boto3.client("cloudwatch", region_name="us-east-1")
    environment = Environment()
    recorder = RunRecorder(environment, None, endpoint="ep")
    with Stubber(client) as stub:
        stub.add_client_error("put_metric_data", service_error_code="AccessDenied", http_status_code=403,
                              service_message="User: arn:aws:iam::1:user/x is not authorized to perform: "
                              "cloudwatch:PutMetricData")
        publisher = LivePublisher(environment, PublishSettings(cloudwatch=True), SageMakerSettings(endpoint_name="ep"),
                                  recorder, cloudwatch=client)
        with pytest.raises(UsageError) as info:
            publisher.start()
    message = str(info.value)
    assert message.startswith("--publish cloudwatch: PutMetricData was refused (AccessDenied")
    assert "cloudwatch:PutMetricData" in message and "\n" not in message
    with Stubber(client) as stub:  # allowed: the check is one real data point of the run's metric set
        stub.add_response("put_metric_data", {})
        LivePublisher(environment, PublishSettings(cloudwatch=True), SageMakerSettings(endpoint_name="ep"), recorder,
                      cloudwatch=client).start()
        stub.assert_no_pending_responses()


def test_the_published_line_says_equal_only_when_the_relation_holds():
    from dataclasses import replace

    from sm_locust.publish.verify import Published, compare

    summary = {"totals": {"requests": 100, "in_flight_at_stop": 2, "errors": {"ModelError": 3}}}
    same = Published(samples=101, sum_ms=2020.0, max_ms=80.0, errors={"ModelError": 3})
    assert compare(same, summary) == (True, "CloudWatch holds 101 EndToEndLatency samples for summary.json's 100 "
                                      "requests (+2 in flight at the stop), mean 20.0 ms, max 80.0 ms, failures by "
                                      "error equal: what was published equals summary.json")
    assert not compare(replace(same, samples=103), summary)[0]
    assert "not all there yet" in compare(replace(same, samples=40), summary)[1]
    assert not compare(replace(same, errors={"ModelError": 2}), summary)[0]


def test_a_period_closed_while_a_call_is_under_way_neither_loses_nor_repeats_its_data():
    per_period = len(period_datums(1, 0))

    class Slow:
        """Stores what it gets; while the first call is 'on the wire' two more periods arrive, overflowing."""

        def __init__(self):
            self.stored: list[dict] = []
            self.sender: CloudWatchSender | None = None

        def put_metric_data(self, Namespace, MetricData):  # noqa: N803
            if not self.stored and self.sender is not None:
                self.sender.add(period_datums(2, 10))
                self.sender.add(period_datums(3, 20))
            self.stored.extend(MetricData)

    client = Slow()
    clock = Clock()
    sender = client.sender = CloudWatchSender(client, "ns", capacity=2 * per_period, sleep=clock.sleep, clock=clock)
    first = period_datums(1, 0)
    sender.add(first)
    sender.drain()
    # the call under way kept its datums; the overflow dropped the oldest waiting period (the 10-s one)
    assert client.stored == first + period_datums(3, 20)
    assert sender.report()["dropped_reasons"] == {BUFFER_FULL: per_period}
    assert sender.report()["periods_sent"] == 2 and sender.pending == 0


def test_two_drains_at_once_send_each_datum_once():
    import gevent

    class Yielding:
        def __init__(self):
            self.stored: list[dict] = []

        def put_metric_data(self, Namespace, MetricData):  # noqa: N803
            gevent.sleep(0.01)  # on the wire: another greenlet runs
            self.stored.extend(MetricData)

    client = Yielding()
    sender = CloudWatchSender(client, "ns", sleep=gevent.sleep)
    sent = []
    for p in range(3):
        datums = period_datums(5, 10.0 * p)
        sent += datums
        sender.add(datums)
    gevent.joinall([gevent.spawn(sender.drain), gevent.spawn(sender.drain)])
    assert client.stored == sent and sender.data_points == len(sent)
