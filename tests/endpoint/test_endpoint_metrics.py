"""The local endpoint's CloudWatch metrics, pure part and publisher: counter snapshots -> datums
(names, namespaces and units the report reads; µs latencies as statistic sets), windows that never
straddle a minute, CPU summed over cores from cumulative readings, per-window latency statistics in
the shared counters, and a publisher that never raises (one warning line per failure streak)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from sm_locust.aws.clients import PLACEHOLDER_KEY, is_loopback
from sm_locust.endpoint import metrics as m
from sm_locust.endpoint.counters import SharedCounters
from sm_locust.endpoint.faults import EndpointConfig
from sm_locust.report.metrics import METRICS_BY_NAME

T0 = datetime(2024, 1, 1, 12, 0, 10, tzinfo=UTC)
DIMS = [{"Name": "EndpointName", "Value": "ep"}, {"Name": "VariantName", "Value": "AllTraffic"}]


def window(**values):
    """A counters snapshot: cumulative fields + one window of latency statistics."""
    snap = {name: 0 for name in ("requests", "invocations", "errors_4xx", "errors_5xx")}
    snap.update(values)
    return snap


def by_name(datums: dict) -> dict:
    return {d["MetricName"]: (ns, d) for ns, items in datums.items() for d in items}


def test_datums_names_namespaces_units_dimensions_and_statistic_sets():
    previous = window(requests=100, invocations=98, errors_4xx=2)
    current = window(requests=160, invocations=156, errors_4xx=3, errors_5xx=2,
                     model_latency_us_window_count=50, model_latency_us_window_sum=50 * 20_000.0,
                     model_latency_us_window_min=18_000.0, model_latency_us_window_max=31_000.0,
                     overhead_latency_us_window_count=50, overhead_latency_us_window_sum=50 * 900.0,
                     overhead_latency_us_window_min=400.0, overhead_latency_us_window_max=2_500.0)
    usage = [m.ResourceUsage(150.0, 40.0, 22.0), m.ResourceUsage(250.0, 42.0, 22.0), m.ResourceUsage(None, 41.0, None)]
    got = by_name(m.build_datums(previous, current, endpoint_name="ep", timestamp=T0, usage=usage))

    assert set(got) == {"Invocations", "InvocationsPerInstance", "Invocation4XXErrors", "Invocation5XXErrors",
                        "ModelLatency", "OverheadLatency", "CPUUtilization", "MemoryUtilization", "DiskUtilization"}
    for name, (namespace, datum) in got.items():
        assert namespace == METRICS_BY_NAME[name].namespace  # what the report asks for
        assert datum["Dimensions"] == DIMS and datum["Timestamp"] == T0
        assert "Value" not in datum and set(datum["StatisticValues"]) == {"SampleCount", "Sum", "Minimum", "Maximum"}

    assert got["ModelLatency"][1]["Unit"] == "Microseconds"
    assert got["ModelLatency"][1]["StatisticValues"] == {"SampleCount": 50.0, "Sum": 1_000_000.0,
                                                         "Minimum": 18_000.0, "Maximum": 31_000.0}
    assert got["OverheadLatency"][1]["StatisticValues"]["Sum"] / 50 == pytest.approx(900.0)  # Average = 900 µs
    assert got["Invocations"][1]["StatisticValues"] == {"SampleCount": 58.0, "Sum": 58.0, "Minimum": 1.0,
                                                        "Maximum": 1.0}
    assert got["Invocations"][1]["Unit"] == "None"
    # errors: one sample per answered request, 1 for an error, 0 otherwise (Average = error rate)
    assert got["Invocation4XXErrors"][1]["StatisticValues"] == {"SampleCount": 60.0, "Sum": 1.0, "Minimum": 0.0,
                                                                "Maximum": 1.0}
    assert got["Invocation5XXErrors"][1]["StatisticValues"]["Sum"] == 2.0
    cpu = got["CPUUtilization"][1]
    assert cpu["Unit"] == "Percent"
    # summed over cores
    assert cpu["StatisticValues"] == {"SampleCount": 2.0, "Sum": 400.0, "Minimum": 150.0, "Maximum": 250.0}
    assert got["MemoryUtilization"][1]["StatisticValues"]["SampleCount"] == 3.0


def test_idle_window_sends_only_utilization_and_instances_split_invocations():
    idle = window(requests=10, invocations=10)
    got = by_name(m.build_datums(idle, dict(idle), endpoint_name="ep", timestamp=T0,
                                 usage=[m.ResourceUsage(5.0, 1.0, 2.0)]))
    # like SageMaker: no traffic, no datum
    assert set(got) == {"CPUUtilization", "MemoryUtilization", "DiskUtilization"}
    assert m.build_datums(idle, dict(idle), endpoint_name="ep", timestamp=T0) == {}

    busy = window(requests=30, invocations=30)
    got = by_name(m.build_datums(idle, busy, endpoint_name="ep", variant_name="blue", timestamp=T0, instance_count=4))
    per = got["InvocationsPerInstance"][1]["StatisticValues"]
    assert per["Sum"] == 5.0 and per["SampleCount"] == 20.0
    assert got["Invocations"][1]["Dimensions"][1] == {"Name": "VariantName", "Value": "blue"}


def test_windows_end_on_the_interval_grid_and_never_straddle_a_minute():
    base = 1704110400.0  # 12:00:00
    assert m.next_boundary(base + 3.2, 10) == base + 10
    assert m.next_boundary(base + 10.0, 10) == base + 20
    assert m.next_boundary(base + 55.0, 45) == base + 60  # the grid says 90, the minute comes first
    assert m.next_boundary(base + 61.0, 45) == base + 90
    now = base + 7.0
    for _ in range(200):  # odd interval: every window stays inside one minute
        end = m.next_boundary(now, 13)
        assert now // 60 == (end - 0.001) // 60 and end > now
        now = end


def test_cpu_percent_summed_over_cores():
    assert m.cpu_percent(None, (10.0, 5.0)) is None
    assert m.cpu_percent((10.0, 5.0), (10.0, 6.0)) is None
    assert m.cpu_percent((10.0, 5.0), (12.0, 8.0)) == pytest.approx(150.0)  # 3 CPU-s in 2 s: 1.5 cores
    assert m.cpu_percent((10.0, 5.0), (12.0, 4.9)) == 0.0  # an unreaped zombie's dip never goes negative


def test_batches_respect_the_put_metric_data_limit():
    sizes = [len(b) for b in m.batches(list(range(2500)))]
    assert sizes == [1000, 1000, 500]


def test_shared_counters_keep_latency_statistics_per_window():
    c = SharedCounters()
    for model_us, overhead_us in ((20_000.0, 500.0), (35_000.0, 300.0), (25_000.0, 900.0)):
        c.add(invocations=1, successes=1, model_latency_us_sum=model_us, overhead_latency_us_sum=overhead_us)
    w = c.take_window()
    assert (w["model_latency_us_window_count"], w["model_latency_us_window_sum"]) == (3, 80_000.0)
    assert (w["model_latency_us_window_min"], w["model_latency_us_window_max"]) == (20_000.0, 35_000.0)
    assert (w["overhead_latency_us_window_min"], w["overhead_latency_us_window_max"]) == (300.0, 900.0)
    c.add(invocations=1, successes=1, model_latency_us_sum=40_000.0, overhead_latency_us_sum=100.0)
    w = c.take_window()
    assert w["model_latency_us_window_count"] == 1 and w["model_latency_us_window_min"] == 40_000.0
    assert w["model_latency_us_sum"] == 120_000.0 and w["invocations"] == 4  # cumulative fields untouched
    assert c.snapshot()["model_latency_us_window_count"] == 0


class FakeCloudWatch:
    def __init__(self, fail: int = 0):
        self.calls: list[tuple[str, list]] = []
        self.fail = fail

    def put_metric_data(self, Namespace, MetricData):  # noqa: N803 (boto3's names)
        if self.fail:
            self.fail -= 1
            raise ConnectionError("connection refused\nsecond line")
        self.calls.append((Namespace, MetricData))


class Clock:
    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_publisher_windows_stamps_and_final_flush():
    counters, cw, clock = SharedCounters(), FakeCloudWatch(), Clock(1704110405.0)
    counters.add(requests=7, invocations=7)  # before the publisher: not this run's
    pub = m.MetricsPublisher(counters, endpoint_name="ep", cloudwatch=cw, clock=clock)
    counters.add(requests=3, invocations=3, successes=3)
    for _ in range(3):
        counters.add(model_latency_us_sum=10_000.0, overhead_latency_us_sum=100.0)
    clock.now += 5
    assert pub.publish_once() == 6  # Invocations, PerInstance, 4XX, 5XX, ModelLatency, Overhead: one call
    (namespace, data), = cw.calls
    assert namespace == "AWS/SageMaker"
    sent = {d["MetricName"]: d for d in data}
    assert sent["Invocations"]["StatisticValues"]["Sum"] == 3
    assert sent["ModelLatency"]["Timestamp"] == datetime.fromtimestamp(1704110405.0, UTC)  # window start
    counters.add(requests=2, invocations=2)
    clock.now += 1
    pub.stop()  # no thread started: just the final flush
    assert {d["MetricName"]: d for d in cw.calls[-1][1]}["Invocations"]["StatisticValues"]["Sum"] == 2
    assert cw.calls[-1][1][0]["Timestamp"] == datetime.fromtimestamp(1704110410.0, UTC)
    pub.stop()  # idempotent
    assert len(cw.calls) == 2


def test_an_autoscaled_async_endpoint_publishes_its_backlog_over_the_instances_in_service():
    counters, cw = SharedCounters(), FakeCloudWatch()
    gauges = iter([(4.0, 1.0), (4.0, 1.0)])
    pub = m.MetricsPublisher(counters, endpoint_name="ep", cloudwatch=cw, clock=Clock(1704110405.0),
                             invocation_counts=False, async_gauges=lambda: next(gauges), async_scaled=True)
    pub.sample(cpu_only=True)
    pub.publish_once()  # no instance in service: requests wait without capacity
    sent = {d["MetricName"]: d for _, data in cw.calls for d in data}
    assert sent["HasBacklogWithoutCapacity"]["StatisticValues"]["Maximum"] == 1.0
    counters.set_value("async_instances", 2.0)
    pub.sample(cpu_only=True)
    pub.publish_once()
    sent = {d["MetricName"]: d for d in cw.calls[-1][1]}
    assert sent["HasBacklogWithoutCapacity"]["StatisticValues"]["Maximum"] == 0.0
    assert sent["ApproximateBacklogSizePerInstance"]["StatisticValues"]["Maximum"] == 2.0  # 4 over 2 instances


def test_a_publisher_thread_that_starts_late_still_closes_the_window_at_its_minute():
    """Built at :58, its thread running only at :61 (a busy machine): the window opened at :58 closes at
    once, so the next one, holding the run's requests, is stamped in the minute they were served."""
    counters, cw, clock = SharedCounters(), FakeCloudWatch(), Clock(1704110458.0)  # 12:00:58
    pub = m.MetricsPublisher(counters, endpoint_name="ep", cloudwatch=cw, clock=clock)
    clock.now += 3  # 12:01:01: the thread's first look

    class StopAfter:
        def __init__(self):
            self.waits = 0

        def wait(self, timeout):
            self.waits += 1
            return self.waits > 1

        def is_set(self):
            return False

        def set(self):
            pass

    pub._stop = StopAfter()
    pub._loop()
    counters.add(requests=5, invocations=5)
    clock.now += 2
    pub.publish_once()
    stamps = [d["Timestamp"] for _, data in cw.calls for d in data if d["MetricName"] == "Invocations"]
    assert stamps == [datetime.fromtimestamp(1704110461.0, UTC)]  # the window opened at 12:01:01


def test_publisher_failures_never_raise_and_log_one_line_per_streak(caplog):
    counters, cw = SharedCounters(), FakeCloudWatch(fail=3)
    pub = m.MetricsPublisher(counters, endpoint_name="ep", cloudwatch=cw, url="http://127.0.0.1:9")
    with caplog.at_level(logging.WARNING, logger=m.log.name):
        for _ in range(3):
            counters.add(requests=1, invocations=1)
            assert pub.publish_once() == 0
        counters.add(requests=1, invocations=1)
        assert pub.publish_once() > 0
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert "not published to http://127.0.0.1:9 (ConnectionError: connection refused)" in lines[0]
    assert "\n" not in lines[0] and "published again" in lines[1]
    assert pub.failures == 3


def test_publisher_thread_publishes_on_its_own_and_stops():
    counters, cw = SharedCounters(), FakeCloudWatch()

    class Sampler:
        def sample(self, cpu_only=False):
            return m.ResourceUsage(cpu_pct=50.0, memory_pct=None if cpu_only else 10.0)

    pub = m.MetricsPublisher(counters, endpoint_name="ep", cloudwatch=cw, interval_s=1.0, sampler=Sampler(),
                             sample_every_s=0.2).start()
    counters.add(requests=1, invocations=1)
    import time

    deadline = time.monotonic() + 60  # a wait, not a bound: it ends at the first publication
    while not cw.calls and time.monotonic() < deadline:
        time.sleep(0.05)
    pub.stop()
    namespaces = {ns for ns, _ in cw.calls}
    assert namespaces == {"AWS/SageMaker", "/aws/sagemaker/Endpoints"}
    invocations = sum(d["StatisticValues"]["Sum"] for _, data in cw.calls for d in data
                      if d["MetricName"] == "Invocations")
    assert invocations == 1


def test_the_shutdown_window_keeps_the_memory_the_instance_had():
    """A run that ends seconds into a minute: the window's only reading is the CPU-only one taken at
    shutdown; its MemoryUtilization is the last full reading's, never missing and never the near-zero
    of workers already gone. A window with readings of its own keeps them."""
    counters, cw = SharedCounters(), FakeCloudWatch()
    memory = iter([10.0, 12.0, 30.0])

    class Sampler:
        def sample(self, cpu_only=False):
            return m.ResourceUsage(cpu_pct=50.0, memory_pct=None if cpu_only else next(memory), disk_pct=None)

    pub = m.MetricsPublisher(counters, endpoint_name="ep", cloudwatch=cw, sampler=Sampler())

    def memory_of_last_call():
        found = [d for d in cw.calls[-1][1] if d["MetricName"] == "MemoryUtilization"]
        return found[0]["StatisticValues"] if found else None

    pub.sample()
    pub.sample()  # 12 %: the last full reading
    counters.add(requests=1, invocations=1)
    pub.publish_once()
    assert memory_of_last_call() == {"SampleCount": 2, "Sum": 22.0, "Minimum": 10.0, "Maximum": 12.0}
    counters.add(requests=1, invocations=1)
    pub.stop()  # the next minute's only reading: at shutdown
    assert memory_of_last_call() == {"SampleCount": 1, "Sum": 12.0, "Minimum": 12.0, "Maximum": 12.0}

    pub = m.MetricsPublisher(counters, endpoint_name="ep", cloudwatch=cw, sampler=Sampler())
    pub.sample()  # 30 %: the window has its own memory; the shutdown reading adds CPU only
    pub.stop()
    assert memory_of_last_call() == {"SampleCount": 1, "Sum": 30.0, "Minimum": 30.0, "Maximum": 30.0}


def test_endpoint_name_dimension_and_serve_flags():
    assert m.endpoint_name_for(EndpointConfig()) == m.DEFAULT_ENDPOINT_NAME
    assert m.endpoint_name_for(EndpointConfig(endpoint_name="a")) == "a"
    assert m.endpoint_name_for(EndpointConfig(endpoint_name="a", metrics_endpoint_name="b")) == "b"
    with pytest.raises(ValueError, match="--metrics-interval"):
        EndpointConfig(metrics_interval_s=0.5).validate()

    import argparse

    from sm_locust.cli import serve
    from sm_locust.endpoint.server import LocalEndpoint

    parser = argparse.ArgumentParser()
    serve.add_parser(parser.add_subparsers())
    args = parser.parse_args(["serve", "--cloudwatch-url", "http://127.0.0.1:5000", "--metrics-interval", "5",
                              "--metrics-endpoint-name", "my-ep"])
    config = serve.config_from_args(args)
    assert (config.cloudwatch_url, config.metrics_interval_s, config.metrics_endpoint_name) == (
        "http://127.0.0.1:5000", 5.0, "my-ep")
    command = LocalEndpoint(config).command()
    assert command[command.index("--metrics-interval") + 1] == "5.0"
    assert command[command.index("--metrics-endpoint-name") + 1] == "my-ep"


def test_loopback_client_gets_placeholder_credentials_never_the_users(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAUSERKEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "user-secret")
    client = m.make_client("http://127.0.0.1:5000")
    creds = client._request_signer._credentials.get_frozen_credentials()
    assert creds.access_key == PLACEHOLDER_KEY and creds.secret_key == PLACEHOLDER_KEY
    assert client.meta.endpoint_url == "http://127.0.0.1:5000"
    assert is_loopback("http://localhost:1") and not is_loopback("https://monitoring.us-east-1.amazonaws.com")


def test_an_async_endpoints_metrics_units_and_dimensions():
    previous = window(async_results=10, async_failures=1)
    current = window(async_results=16, async_failures=3,
                     async_time_in_backlog_us_window_count=8, async_time_in_backlog_us_window_sum=8 * 250_000.0,
                     async_time_in_backlog_us_window_min=0.0, async_time_in_backlog_us_window_max=900_000.0,
                     async_total_processing_time_ms_window_count=8, async_total_processing_time_ms_window_sum=8 * 450.0,
                     async_total_processing_time_ms_window_min=200.0, async_total_processing_time_ms_window_max=1100.0)
    usage = [m.ResourceUsage(async_backlog=b, async_oldest_age_s=a) for b, a in ((4, 0.5), (6, 0.9), (0, 0.0))]
    got = by_name(m.build_datums(previous, current, endpoint_name="ep", timestamp=T0, usage=usage,
                                 instance_count=2, invocation_counts=False))
    assert set(got) == {"ApproximateBacklogSize", "ApproximateBacklogSizePerInstance", "ApproximateAgeOfOldestRequest",
                        "HasBacklogWithoutCapacity", "InvocationsProcessed", "InvocationFailures", "TimeInBacklog",
                        "TotalProcessingTime"}
    endpoint_only = {"ApproximateBacklogSize", "ApproximateBacklogSizePerInstance", "ApproximateAgeOfOldestRequest",
                     "HasBacklogWithoutCapacity"}
    for name, (namespace, datum) in got.items():
        assert namespace == "AWS/SageMaker" == METRICS_BY_NAME[name].namespace
        assert datum["Dimensions"] == (DIMS[:1] if name in endpoint_only else DIMS)
        assert METRICS_BY_NAME[name].endpoint_only == (name in endpoint_only)  # what the report asks with
    stats = {name: datum["StatisticValues"] for name, (_, datum) in got.items()}
    assert stats["ApproximateBacklogSize"] == {"SampleCount": 3.0, "Sum": 10.0, "Minimum": 0.0, "Maximum": 6.0}
    assert stats["ApproximateBacklogSizePerInstance"]["Maximum"] == 3.0  # two instances
    assert stats["HasBacklogWithoutCapacity"]["Maximum"] == 0.0  # instances running
    assert got["ApproximateAgeOfOldestRequest"][1]["Unit"] == "Seconds"
    assert stats["InvocationsProcessed"]["Sum"] == 8.0 and stats["InvocationFailures"]["Sum"] == 2.0
    assert got["TimeInBacklog"][1]["Unit"] == "Microseconds" and stats["TimeInBacklog"]["Maximum"] == 900_000.0
    assert got["TotalProcessingTime"][1]["Unit"] == "Milliseconds" and stats["TotalProcessingTime"]["Sum"] == 3600.0
    without = by_name(m.build_datums(previous, current, endpoint_name="ep", timestamp=T0,
                                     usage=[m.ResourceUsage(async_backlog=3)], instance_count=0))
    assert without["HasBacklogWithoutCapacity"][1]["StatisticValues"]["Maximum"] == 1.0  # scale from zero
    assert "ApproximateBacklogSize" not in by_name(m.build_datums(window(), window(), endpoint_name="ep",
                                                                  timestamp=T0, usage=[m.ResourceUsage(10.0)]))


def test_async_gauges_from_the_shared_counters():
    counters = SharedCounters()
    counters.add(async_accepted=7, async_results=3, async_failures=1)
    assert m.async_gauges(counters, clock=lambda: 100.0) == (3.0, 0.0)
    counters.set_value("async_oldest_waiting_since", 97.5)
    assert m.async_gauges(counters, clock=lambda: 100.0) == (3.0, 2.5)
