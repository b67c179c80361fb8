"""The fleet emulation (endpoint/fleet.py, fleet_control.py, control.py): a variant of several
instances that autoscales, answered as SageMaker's runtime and DescribeEndpoint would."""

from __future__ import annotations

import argparse
import random
import time

import gevent
from gevent.pywsgi import WSGIServer

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from sm_locust.cli.serve import add_parser, config_from_args
from sm_locust.endpoint.app import EndpointApp
from sm_locust.endpoint.control import scaling_log
from sm_locust.endpoint.faults import EndpointConfig
from sm_locust.endpoint.fleet import FleetConfig, FleetRouter, SharedFleet, choose_instance, queue_wait_s
from sm_locust.endpoint.fleet_control import FleetController
from sm_locust.endpoint.server import LocalEndpoint
from sm_locust.errors import UsageError
from sm_locust.plateau.rates import parse_traffic
from sm_locust.scaling.policy import ScalingPolicy
from sm_locust.scaling.simulate import simulate
from sm_locust.scaling.timeline import InstanceSample
from tests.fakes import ManualClock

PAYLOAD = b'{"instances": [{"feat_ids": [' + b", ".join([b"1"] * 39) + b'], "feat_vals": [' + \
          b", ".join([b"0.5"] * 39) + b"]}]}"
NO_RETRY = Config(retries={"mode": "standard", "total_max_attempts": 1}, max_pool_connections=32)


# -- pure parts -----------------------------------------------------------------------------------


def test_routing_picks_only_instances_in_service():
    rng = random.Random(1)
    picks = {choose_instance([0, 2], [0, 0, 0], "random", rng) for _ in range(50)}
    assert picks == {0, 2}
    assert choose_instance([0, 1, 2], [3, 1, 2], "least-outstanding", rng) == 1


def test_a_queued_request_sleeps_about_the_time_its_queue_needs():
    assert queue_wait_s(1, 0.04, 4) == 0.001  # next in line: a slot frees any moment
    assert queue_wait_s(4, 0.04, 4) == pytest.approx(0.5 * 4 * 0.04 / 4)
    assert queue_wait_s(10_000, 1.0, 1) == 0.05


def test_shared_fleet_routes_counts_and_scales():
    clock = ManualClock()
    fleet = SharedFleet(FleetConfig(instances=1, policy=ScalingPolicy(1, 3, 100).check(), time_scale=10), slots=2,
                        clock=clock)
    rng = random.Random(0)
    tickets = [fleet.admit(rng) for _ in range(3)]
    assert [i for i, _ in tickets] == [0, 0, 0]  # the only instance in service
    assert fleet.arrivals() == (3.0, 3.0)  # each counted as 1 / 1 instance
    assert [fleet.ahead(0, t) > 0 for _, t in tickets] == [False, False, True]  # 2 slots: the third queues
    fleet.finish(0)
    assert fleet.ahead(0, tickets[2][1]) <= 0  # one finished: the third runs
    fleet.set_desired(3, ready_at=240.0)
    assert fleet.counts(0.0) == (3, 1)
    clock.now += 24.0  # x10: emulated second 240
    assert fleet.now_s() == pytest.approx(240.0) and fleet.counts(fleet.now_s()) == (3, 3)
    fleet.admit(rng)
    assert fleet.arrivals()[1] == pytest.approx(3 + 1 / 3)  # 1 / 3 instances in service
    fleet.set_desired(1, ready_at=0.0)
    assert fleet.counts(fleet.now_s()) == (1, 1) and fleet.serving(fleet.now_s()) == [0]  # the newest removed


def test_the_router_queues_beyond_the_slots_and_frees_them():
    clock = ManualClock()
    fleet = SharedFleet(FleetConfig(instances=1), slots=1, clock=clock)
    sleeps = []
    router = FleetRouter(fleet, service_s=0.1, sleep=lambda s: (sleeps.append(s), fleet.finish(0)))
    fleet.admit(random.Random(0))  # one request already holds the only slot
    assert router.serve(lambda: "answered") == "answered"
    assert len(sleeps) == 1  # waited until the first one finished (the fake sleep finishes it)
    assert fleet.outstanding() == [0.0]


def drive(controller: FleetController, clock: ManualClock, traffic, time_scale: float, step_s: float = 1.0):
    """Send the traffic's requests (real req/s, evenly, finished at once) through the shared table, a tick per
    emulated `step_s`."""
    fleet = controller.fleet
    rng = random.Random(0)
    t, owed = 0.0, 0.0
    while t < traffic.duration_s:
        owed += traffic.rate_at(t) * step_s / time_scale + 1e-9
        while owed >= 1:
            instance, _ = fleet.admit(rng)
            fleet.finish(instance)
            owed -= 1
        clock.now += step_s / time_scale
        t += step_s
        controller.tick()


def test_the_controller_scales_the_table_as_the_model_says():
    # 2 then 15 req/s against a target of 420/min: the example at a tenth of the rate.
    policy = ScalingPolicy(1, 3, 420, scale_out_cooldown_s=60, scale_in_cooldown_s=300).check()
    traffic = parse_traffic([{"duration_s": 300, "rps": 2}, {"duration_s": 600, "rps": 15},
                             {"duration_s": 300, "rps": 2}])
    clock = ManualClock()
    config = FleetConfig(instances=1, policy=policy, instance_start_s=240, time_scale=30)
    fleet = SharedFleet(config, slots=4, clock=clock)
    said = []
    controller = FleetController(config, fleet, say=said.append).begin()
    drive(controller, clock, traffic, time_scale=30)
    model = simulate(policy, traffic, instance_start_s=240)
    assert fleet.events() == model.instances == [InstanceSample(0, 1, 1), InstanceSample(480, 3, 1),
                                                  InstanceSample(720, 3, 3)]
    assert [p.value for p in fleet.periods()[:7]] == pytest.approx([120, 120, 120, 120, 120, 900, 900])
    assert said == ["sm-locust endpoint: scale out 1 -> 3 at 480 s (InvocationsPerInstance 900), 180 s after the "
                    "metric crossed, serving at 720 s"]


class FakeCloudWatch:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[dict]]] = []

    def put_metric_data(self, Namespace: str, MetricData: list[dict]) -> None:  # noqa: N803 - boto3's names
        self.calls.append((Namespace, MetricData))


def test_the_cloudwatch_stand_in_gets_emulated_minutes():
    policy = ScalingPolicy(1, 3, 420, scale_out_cooldown_s=60).check()
    traffic = parse_traffic([{"duration_s": 300, "rps": 2}, {"duration_s": 600, "rps": 15}])
    clock, cloudwatch = ManualClock(), FakeCloudWatch()
    config = FleetConfig(instances=1, policy=policy, instance_start_s=240, time_scale=30)
    fleet = SharedFleet(config, slots=4, clock=clock, wall=lambda: 1_700_000_000.0)
    controller = FleetController(config, fleet, cloudwatch=cloudwatch, endpoint_name="ep", say=lambda _: None).begin()
    drive(controller, clock, traffic, time_scale=30)
    sagemaker = [(d["Timestamp"].timestamp() - 1_700_000_000.0, {x["MetricName"]: x["Value"] for x in data})
                 for ns, data in cloudwatch.calls if ns == "AWS/SageMaker" for d in data[:1]]
    assert [t for t, _ in sagemaker] == [60.0 * i for i in range(len(sagemaker))]  # stamped in emulated minutes
    assert sagemaker[1][1] == {"Invocations": 120.0, "InvocationsPerInstance": 120.0}  # 2 req/s, per minute
    assert sagemaker[6][1] == {"Invocations": 900.0, "InvocationsPerInstance": 900.0}  # 15 req/s on 1 instance
    counts = [{x["MetricName"]: x["Value"] for x in data} for ns, data in cloudwatch.calls
              if ns == "sm-locust/Endpoints"]  # as DescribeEndpoint says them at each minute's end
    assert counts[7] == {"DesiredInstanceCount": 3.0, "CurrentInstanceCount": 1.0}  # decided at 480 s, starting
    assert counts[-1] == {"DesiredInstanceCount": 3.0, "CurrentInstanceCount": 3.0}  # serving from 720 s
    dims = cloudwatch.calls[0][1][0]["Dimensions"]
    assert dims == [{"Name": "EndpointName", "Value": "ep"}, {"Name": "VariantName", "Value": "AllTraffic"}]


def test_low_traffic_scales_in_at_once_after_fifteen_minutes():
    policy = ScalingPolicy(1, 3, 420, scale_in_cooldown_s=300).check()
    clock = ManualClock()
    config = FleetConfig(instances=3, policy=policy, instance_start_s=240, time_scale=60)
    fleet = SharedFleet(config, slots=4, clock=clock)
    controller = FleetController(config, fleet, say=lambda _: None).begin()
    drive(controller, clock, parse_traffic([{"duration_s": 1500, "rps": 2}]), time_scale=60)
    # 2 req/s = 40 per instance per minute, far below 90 % of 420: after 15 minutes, ceil(3 x 40 / 420) = 1
    assert fleet.events() == [InstanceSample(0, 3, 3), InstanceSample(900, 1, 1)]
    assert fleet.serving(fleet.now_s()) == [0]


def test_the_concurrency_metric_counts_requests_in_the_containers():
    policy = ScalingPolicy(1, 3, 5, metric="ConcurrentRequestsPerModel").check()
    clock = ManualClock()
    config = FleetConfig(instances=1, policy=policy, instance_start_s=60, time_scale=10)
    fleet = SharedFleet(config, slots=4, clock=clock)
    controller = FleetController(config, fleet, say=lambda _: None).begin()
    rng = random.Random(0)
    for _ in range(12):  # 12 requests in the container (4 served, 8 queued), never finished here
        fleet.admit(rng)
    for _ in range(40):  # 40 emulated seconds, a tick per second
        clock.now += 0.1
        controller.tick()
    assert [p.value for p in fleet.periods()[:3]] == [12.0, 12.0, 12.0]  # 10-s periods, queued ones included
    assert fleet.events()[1] == InstanceSample(30, 3, 1)  # three periods above 5: ceil(1 x 12 / 5) = 3


def test_a_minimum_above_the_starting_instances_scales_at_second_zero():
    config = FleetConfig(instances=1, policy=ScalingPolicy(2, 3, 420).check(), instance_start_s=60)
    fleet = SharedFleet(config, slots=4, clock=ManualClock())
    FleetController(config, fleet, say=lambda _: None).begin()
    assert fleet.events() == [InstanceSample(0, 1, 1), InstanceSample(0, 2, 1)]


# -- served ---------------------------------------------------------------------------------------


@pytest.fixture
def serve():
    servers = []

    def start(**settings):
        config = EndpointConfig(**settings)
        config.validate()
        state = SharedFleet(config.fleet, config.max_concurrency)
        app = EndpointApp(config, fleet_state=state)
        server = WSGIServer(("127.0.0.1", 0), app, log=None)
        server.start()
        servers.append(server)
        url = f"http://127.0.0.1:{server.server_port}"
        return app, url

    yield start
    for server in servers:
        server.stop()


def _latencies(url: str, n: int) -> list[float]:
    client = boto3.client("sagemaker-runtime", endpoint_url=url, config=NO_RETRY)

    def call() -> float:
        t0 = time.perf_counter()
        client.invoke_endpoint(EndpointName="fleet", Body=PAYLOAD, ContentType="application/json")
        return time.perf_counter() - t0

    call()  # untimed: botocore's first-call setup and the server's first request are not the slots' rounds
    jobs = [gevent.spawn(call) for _ in range(n)]
    gevent.joinall(jobs, timeout=20, raise_error=True)
    return [j.value for j in jobs]


@pytest.mark.e2e
def test_each_instance_has_its_own_slots(serve):
    def queued(app) -> list[float]:  # each look of a request at its instance's queue: > 0 while it waits
        looks: list[float] = []
        ahead = app.fleet.fleet.ahead
        app.fleet.fleet.ahead = lambda *a: looks.append(ahead(*a)) or looks[-1]
        return looks

    app, one = serve(max_concurrency=4, service_time_ms=100, fleet=FleetConfig(instances=1))
    looks = queued(app)
    assert max(_latencies(one, 12)) >= 0.29  # 12 requests, 4 slots: three rounds of 100 ms
    assert max(looks) > 0  # some waited for a slot
    three_instances = FleetConfig(instances=3, routing="least-outstanding")
    app, three = serve(max_concurrency=4, service_time_ms=100, fleet=three_instances)
    looks = queued(app)
    _latencies(three, 12)
    assert len(looks) == 13 and max(looks) <= 0  # 3 instances x 4 slots: all 12 at once, none waited


@pytest.mark.e2e
def test_describe_endpoint_answers_the_instance_counts(serve):
    app, url = serve(max_concurrency=2, endpoint_name="fleet", fleet=FleetConfig(instances=2))
    sm = boto3.client("sagemaker", endpoint_url=url, config=NO_RETRY)
    answer = sm.describe_endpoint(EndpointName="fleet")
    [variant] = answer["ProductionVariants"]
    counts = (variant["VariantName"], variant["DesiredInstanceCount"], variant["CurrentInstanceCount"])
    assert counts == ("AllTraffic", 2, 2)
    assert answer["EndpointStatus"] == "InService"
    app.fleet.fleet.set_desired(3, ready_at=10_000.0)  # a scale-out whose instance is still starting
    answer = sm.describe_endpoint(EndpointName="fleet")
    assert answer["EndpointStatus"] == "Updating"
    assert answer["ProductionVariants"][0]["DesiredInstanceCount"] == 3
    assert answer["ProductionVariants"][0]["CurrentInstanceCount"] == 2
    with pytest.raises(ClientError) as info:
        sm.describe_endpoint(EndpointName="other")
    assert info.value.response["Error"]["Code"] == "ValidationException"
    with pytest.raises(ClientError) as info:
        sm.delete_endpoint(EndpointName="fleet")
    assert info.value.response["Error"]["Code"] == "UnknownOperationException"
    log = scaling_log(app)
    assert log["desired"] == 3 and log["in_service"] == 2 and log["instances"][0] == {"t_s": 0.0, "desired": 2,
                                                                                       "in_service": 2}


@pytest.mark.e2e
def test_instances_are_shared_by_two_gunicorn_workers(endpoint_factory):
    ep = endpoint_factory(workers=2, max_concurrency=2, service_time_ms=100, fleet=FleetConfig(instances=1))
    assert max(_latencies(ep.url, 6)) >= 0.28  # 2 slots for both workers: three rounds, not two
    sm = boto3.client("sagemaker", endpoint_url=ep.url, config=NO_RETRY)
    assert sm.describe_endpoint(EndpointName="x")["ProductionVariants"][0]["CurrentInstanceCount"] == 1


# -- flags ----------------------------------------------------------------------------------------


def _config(*flags: str) -> EndpointConfig:
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    return config_from_args(parser.parse_args(["serve", *flags]))


def test_flags_build_the_fleet_and_round_trip_through_local_endpoint():
    config = _config("--instances", "1", "--max-concurrency", "4", "--target-value", "4200", "--max-instances", "3",
                     "--scale-out-cooldown-s", "60", "--instance-start-s", "240", "--time-scale", "30")
    fleet = config.fleet
    assert fleet.policy == ScalingPolicy(1, 3, 4200.0, scale_out_cooldown_s=60.0)
    assert (fleet.instances, fleet.instance_start_s, fleet.time_scale, fleet.routing) == (1, 240.0, 30.0, "random")
    command = LocalEndpoint(config).command()
    assert _config(*command[command.index("serve") + 5:]).fleet == fleet  # after --host H --port P
    assert _config("--target-value", "10", "--max-instances", "4", "--min-instances", "2").fleet.instances == 2
    assert _config().fleet is None


@pytest.mark.parametrize("flags, needle", [
    (["--min-instances", "2"], "add --instances N"),
    (["--instances", "1", "--max-instances", "3"], "--max-instances shapes the autoscaling policy; add --target-value"),
    (["--instances", "1", "--target-value", "100"], "--target-value needs --max-instances"),
    (["--target-value", "100", "--min-instances", "3", "--max-instances", "2"],
     "--min-instances (3) is above --max-instances (2)"),
    (["--target-value", "0", "--max-instances", "2"], "--target-value must be a number above 0"),
    (["--target-value", "9", "--max-instances", "2", "--scaling-metric", "CPU"],
     "--scaling-metric: unknown scaling metric"),
    (["--instances", "2", "--routing", "round-robin"], "unknown routing strategy 'round-robin'"),
    (["--instances", "2", "--llm"], "--llm cannot be combined with the fleet emulation"),
])
def test_bad_fleet_flags_are_one_line_usage_errors(flags, needle):
    with pytest.raises(UsageError) as info:
        _config(*flags)
    assert needle in info.value.message and "\n" not in info.value.message


@pytest.mark.parametrize("settings, needle", [
    ({"instances": 0}, "--instances must be a whole number of instances, at least 1"),
    ({"instances": 1_000_000_000}, "--instances must be at most 1,000 instances"),  # was: an 8 GB shared table
    ({"time_scale": 0.0}, "--time-scale must be a number above 0"),
    ({"time_scale": 1e300}, "--time-scale must be a number above 0 and at most 1000"),
])
def test_a_fleet_is_bounded_wherever_it_is_built(settings, needle):
    """The bounds serve's parser applies (--instances, --time-scale) hold for a fleet built from a sweep file."""
    from sm_locust.endpoint.fleet import FleetConfig
    from sm_locust.scaling.policy import ScalingPolicy

    with pytest.raises(UsageError, match=needle):
        FleetConfig(**settings).validate()
    with pytest.raises(UsageError, match="max_instances must be at most 1,000 instances, got 1,000,000,000"):
        ScalingPolicy(1, 1_000_000_000, 5.0).check()
