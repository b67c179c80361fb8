"""The async sweep kind without a server: its ranking on synthetic figures (a tie said and broken by the
cost to run, adjacent brackets told apart, INCONCLUSIVE never recommended), the figures read from a
summary.json the async search wrote, the file's checks, the plan, and the SageMaker endpoint config
(AsyncInferenceConfig) against botocore's Stubber, which validates every request against the API model."""

from __future__ import annotations

import threading

import boto3
import pytest
from botocore.stub import ANY, Stubber

from sm_locust.errors import UsageError
from sm_locust.measure.uncertainty import Interval
from sm_locust.plateau.asyncsearch import AsyncRateSearch
from sm_locust.plateau.asyncslo import SloJudgement, TimeToResultSlo
from sm_locust.sweep.api import load_sweep, plan_lines
from sm_locust.sweep.asynchronous.deploy import LocalAsyncDeployer, SageMakerAsyncDeployer, async_inference_config
from sm_locust.sweep.asynchronous.measure import measure, priced
from sm_locust.sweep.asynchronous.rank import AsyncCandidate, recommend
from sm_locust.sweep.deployers import Deployment
from sm_locust.sweep.objective import Objective
from tests.conftest import ROOT, SAMPLE_PAYLOAD

PRICE = 0.23
OBJECTIVE = Objective(slo_ms=1500, percentile=95)


def candidate(index: int, instances: int, workers: int, capacity: float, stop: float | None, *,
              ttr: float = 600.0, price: float | None = PRICE, **extra) -> AsyncCandidate:
    """A configuration as the sweep hands it to the ranking: its bracket priced from instance-hours."""
    cost = priced(capacity, [capacity, stop], instances, price)
    return AsyncCandidate(index=index, label=f"c{index}", instance_count=instances, workers=workers,
                          capacity_rps=capacity, capacity_ci95=[capacity, stop], time_to_result_ms=ttr,
                          time_to_result_ci95=[ttr - 50, ttr + 50], fleet_per_hour=None if price is None
                          else price * instances, **vars(cost), **extra)


def test_a_cost_difference_inside_the_brackets_is_a_tie_broken_by_the_price_to_run_and_said():
    """1 instance at [6, 9) req/s and 2 at [12, 18) cost the same per 1M within their brackets: a tie, and
    the one that costs less to run is recommended, the sentence saying both."""
    one, two = candidate(1, 1, 2, 6, 9), candidate(2, 2, 2, 12, 18)
    rec = recommend([two, one], OBJECTIVE)
    assert rec.winner is one and rec.tied == [2]
    assert "it TIES with c2 on $ per 1M (their intervals overlap" in rec.reason, rec.reason
    assert "the cheaper to run is recommended" in rec.reason and "$0.230/h" in rec.reason, rec.reason
    assert rec.lost[2].startswith("ties with c1 on $ per 1M; c1 costs less to run"), rec.lost


def test_a_cost_difference_beyond_the_brackets_decides_without_a_tie():
    cheap, dear = candidate(1, 1, 4, 20, 24), candidate(2, 2, 1, 6, 9)
    rec = recommend([dear, cheap], OBJECTIVE)
    assert rec.winner is cheap and rec.tied == [] and "TIES" not in rec.reason
    assert rec.lost[2].startswith("$ per 1M $"), rec.lost


def test_adjacent_brackets_are_told_apart_and_overlapping_ones_tie_on_capacity():
    """The rate that stopped one search is not within its capacity: [6, 9) and [9, 12) differ; [6, 12)
    and [9, 12) tie, and the one cheaper to run wins that tie."""
    objective = Objective(slo_ms=1500, percentile=95, optimize="throughput")
    low, high = candidate(1, 1, 1, 6, 9), candidate(2, 1, 2, 9, 12)
    assert recommend([low, high], objective).winner is high
    assert recommend([low, high], objective).tied == []
    wide, dear = candidate(1, 1, 1, 6, 12), candidate(2, 2, 1, 9, 12)
    rec = recommend([dear, wide], objective)
    assert rec.winner is wide and rec.tied == [2] and "TIES" in rec.reason


def test_a_lower_bound_ranks_above_a_bracket_below_it():
    """A search that reached max_rps without stopping shows [30, ...): above [24, 30), never tied with it."""
    objective = Objective(slo_ms=1500, percentile=95, optimize="throughput")
    top, below = candidate(1, 1, 4, 30, None), candidate(2, 1, 4, 24, 30)
    rec = recommend([below, top], objective)
    assert rec.winner is top and rec.tied == [] and "30 req/s [30, ...)" in rec.reason


def test_inconclusive_is_never_recommended_however_good_its_figures():
    best = candidate(1, 1, 8, 60, 66, inconclusive=True,
                     inconclusive_reason="at 66 req/s the p95 time to result straddles the SLO")
    plain = candidate(2, 2, 1, 6, 9)
    rec = recommend([best, plain], OBJECTIVE)
    assert rec.winner is plain and "(chosen without c1: INCONCLUSIVE" in rec.reason, rec.reason
    assert " — the only configuration known to meet the objective (chosen without c1: " in rec.reason  # not "meets"
    assert rec.lost[1].startswith("INCONCLUSIVE: at 66 req/s") and "never recommended" in rec.lost[1]
    alone = recommend([best], OBJECTIVE)
    assert alone.winner is None and "INCONCLUSIVE" in alone.reason
    # as the sweep hands it over: its row's status says it too (sweep.json, the exit code)
    best.status, best.reason = "inconclusive", "its search could not decide: at 66 req/s ..."
    rec = recommend([plain, best], OBJECTIVE)
    assert rec.winner is plain and "(chosen without c1: INCONCLUSIVE" in rec.reason
    assert rec.lost[1] == "INCONCLUSIVE: its search could not decide: at 66 req/s ..."


def test_the_target_and_the_error_budget_disqualify_and_the_target_ranks_by_the_price_to_run():
    objective = Objective(slo_ms=1500, percentile=95, target_rps=10)
    small, big, failing = candidate(1, 1, 2, 6, 9), candidate(2, 2, 2, 12, 15), candidate(3, 4, 2, 24, 27)
    failing.error_rate = 0.5
    lavish = candidate(4, 4, 4, 48, None)
    rec = recommend([small, big, failing, lavish], objective)
    assert rec.winner is big
    assert rec.lost[1] == "capacity 6 req/s < target 10 req/s"
    assert rec.lost[3].startswith("error rate 50 %")
    assert rec.lost[4].startswith("price to run $0.920/h vs $0.460/h"), rec.lost


def test_without_prices_instance_hours_rank():
    one, two = candidate(1, 1, 2, 6, 9, price=None), candidate(2, 2, 4, 30, 33, price=None)
    rec = recommend([one, two], OBJECTIVE)
    assert rec.winner is two and "instance-hours" in rec.reason and two.cost_per_1m is None
    assert rec.lost[1].startswith("instance-hours per 1M"), rec.lost


# -------------------------------------------------------------------------------------- summary.json

def _bounded(seconds: int = 12) -> list[float]:
    return [2.0] * seconds


def _growing(seconds: int = 12) -> list[float]:
    return [3.0 * i for i in range(seconds)]


def search_summary(steps: list[tuple[list[float], float, float, float]], awaited: int = 0) -> dict:
    """summary.json of an async search with a p95 SLO of 1500 ms: (backlog, time to result, its interval)."""
    slo = TimeToResultSlo(95.0, 1500.0)
    search = AsyncRateSearch(3.0, 3.0, 30.0, slo=slo)
    for backlog, ttr, low, high in steps:
        search.judge(backlog, SloJudgement(slo, ttr, Interval(low, high), results=40, awaited=0))
    return {"schema": 1, "async_search": search.as_dict(),
            "async": {"accepted": 100, "results": 96 - awaited, "failures": 4, "awaited_at_stop": awaited,
                      "backlog_max": 30}}


def test_the_capacity_its_bracket_and_its_time_to_result_come_from_the_search():
    """Bounded and within the SLO at 3 and 6 req/s, above it at 9: capacity 6 in [6, 9), the time to
    result the 6 req/s step's own."""
    summary = search_summary([(_bounded(), 400, 380, 430), (_bounded(), 700, 650, 760), (_bounded(), 2400, 2100, 2900)])
    m = measure(summary)
    assert (m.capacity_rps, m.capacity_ci95, m.stopped_by) == (6.0, [6.0, 9.0], "time to result above the SLO")
    assert (m.time_to_result_ms, m.time_to_result_ci95) == (700, [650, 760])
    assert (m.accepted, m.failures, m.error_rate) == (100, 4, 0.04) and not m.inconclusive
    assert [s["slo"] for s in m.steps] == ["keeps", "keeps", "breach"]
    grows = measure(search_summary([(_bounded(), 400, 380, 430), (_growing(), 900, 800, 1000)]))
    assert (grows.capacity_rps, grows.capacity_ci95, grows.stopped_by) == (3.0, [3.0, 6.0], "backlog grows")


def test_an_undecided_step_above_the_capacity_makes_it_inconclusive_and_no_capacity_is_said():
    m = measure(search_summary([(_bounded(), 400, 380, 430), (_bounded(), 1450, 1200, 1700),
                                (_growing(), 3000, 2500, 3500)]))
    assert m.capacity_rps == 3.0 and m.inconclusive and "straddles the SLO" in (m.inconclusive_reason or "")
    none = measure(search_summary([(_growing(), 3000, 2500, 3500)]))
    assert none.capacity_rps is None and "no rate kept the time-to-result SLO" in (none.no_capacity_reason or "")
    assert measure({"schema": 1}).no_capacity_reason.startswith("the run has no async search")


def test_instance_hours_and_dollars_per_million_at_the_capacity_and_the_brackets_ends():
    cost = priced(10.0, [10.0, 20.0], 2, 0.5)
    hours = 2 / (10 * 3600) * 1e6
    assert cost.instance_hours_per_1m == pytest.approx(hours)
    assert cost.instance_hours_per_1m_ci95 == pytest.approx([hours / 2, hours])
    assert cost.cost_per_1m == pytest.approx(hours * 0.5)
    assert priced(10.0, [10.0, None], 2, 0.5).cost_per_1m_ci95 == pytest.approx([0.0, hours * 0.5])


# ---------------------------------------------------------------------------------------- the file

SWEEP = """\
name: async-workers
deploy: {deploy}
endpoint: {{{endpoint}}}
async:
  instance_count: [1, 2]
  max_concurrent_invocations_per_instance: [1, 4]
load: {{payload: {payload}, async_input_location: 's3://demo/in/request.json', async_result: s3, start_rps: 2,
        max_rps: 12, step_seconds: 5}}
objective: {{slo_ms: 1500, percentile: 95}}
{extra}
"""
LOCAL = "service_time_ms: 200, async_output_path: 's3://demo/out', async_s3_url: 'http://127.0.0.1:9'"


def write(tmp_path, endpoint: str = LOCAL, deploy: str = "local", extra: str = "price_per_hour: 0.23") -> str:
    path = tmp_path / "s.yaml"
    path.write_text(SWEEP.format(deploy=deploy, endpoint=endpoint, payload=SAMPLE_PAYLOAD, extra=extra))
    return str(path)


@pytest.mark.e2e  # the plan names each local endpoint's command line: its free port is bound to be found
def test_the_grid_is_instances_by_workers_and_the_plan_names_each_fleet(tmp_path):
    sweep = load_sweep(write(tmp_path), out=tmp_path / "out")
    assert sweep.spec.kind == "async"
    assert [c.label for c in sweep.configurations] == [
        "instance_count 1, max_concurrent_invocations_per_instance 1",
        "instance_count 1, max_concurrent_invocations_per_instance 4",
        "instance_count 2, max_concurrent_invocations_per_instance 1",
        "instance_count 2, max_concurrent_invocations_per_instance 4"]
    assert [sweep.prices[i].instance_count for i in (1, 2, 3, 4)] == [1, 1, 2, 2]
    lines = plan_lines(sweep)
    assert "--async-max-concurrent 4" in lines[2] and "--async-max-instances 2 --async-instances 2" in lines[3]
    assert "shape async" in lines[-1] and "time_to_result_slo_ms 1500" in lines[-1]
    # twice the instances, twice the instance-hours of the same test
    assert sweep.estimates[3].instance_hours == pytest.approx(2 * sweep.estimates[1].instance_hours)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("change", "needle"), [
    (("async:\n  instance_count: [1, 2]\n  max_concurrent_invocations_per_instance: [1, 4]\n",
      "async:\n  instance_count: [1, 2]\n  max_concurrent_invocations_per_instance: [0, 4]\n"),
     "async.max_concurrent_invocations_per_instance: expected a whole number from 1 to 1,000, got 0"),
    (("  max_concurrent_invocations_per_instance: [1, 4]\n", ""),
     "async.max_concurrent_invocations_per_instance: missing"),
    (("async_result: s3, ", ""), "load.async_result: missing"),
    (("objective: {slo_ms: 1500, percentile: 95}", "objective: {percentile: 95}"), "objective.slo_ms: missing"),
    (("start_rps: 2,", "shape: plateau, start_rps: 2,"), "load.shape: an async sweep's test is the async search"),
    (("async_output_path: 's3://demo/out', ", "async_max_concurrent: 2, "),
     "endpoint.async_max_concurrent: an async sweep's max_concurrent_invocations_per_instance is async."),
])
def test_bad_input_is_one_usage_error_naming_the_key(tmp_path, change, needle):
    path = write(tmp_path)
    text = open(path).read()
    assert change[0] in text
    open(path, "w").write(text.replace(change[0], change[1]))
    with pytest.raises(UsageError) as err:
        load_sweep(path, out=tmp_path / "out")
    assert needle in err.value.message, err.value.message


def test_a_missing_output_path_is_named(tmp_path):
    with pytest.raises(UsageError) as err:
        load_sweep(write(tmp_path, endpoint="service_time_ms: 200"), out=tmp_path / "out")
    assert "async_output_path: missing" in err.value.message


def test_a_local_configuration_is_a_fixed_fleet_of_that_many_instances_and_workers():
    """No scaling policy: N instances in service from the start and at every moment, K workers each."""
    settings = {"service_time_ms": 100, "async_output_path": "s3://demo/out", "async_s3_url": "http://127.0.0.1:9",
                "async.instance_count": 3, "async.max_concurrent_invocations_per_instance": 4}
    config = LocalAsyncDeployer.config(settings)
    config.validate()
    queue = config.async_inference
    assert (queue.max_concurrent, queue.output_path, queue.s3_url) == (4, "s3://demo/out", "http://127.0.0.1:9")
    fleet = queue.scaling
    assert (fleet.instances, fleet.min_instances, fleet.max_instances, fleet.autoscaler()) == (3, 3, 3, None)
    assert config.service_time_ms == 100
    with pytest.raises(UsageError, match="endpoint.workers: the local deployer has no setting 'workers'"):
        LocalAsyncDeployer().check({**settings, "workers": 2}, lambda key: f"endpoint.{key}")


# ------------------------------------------------------------------------------ SageMaker, stubbed

def test_the_sagemaker_endpoint_config_carries_the_async_inference_config_and_everything_is_deleted(tmp_path):
    """CreateEndpointConfig with the instance count and AsyncInferenceConfig (OutputConfig's paths and topics,
    ClientConfig's MaxConcurrentInvocationsPerInstance), validated by the Stubber against botocore's model;
    then the endpoint, its config and the model deleted."""
    client = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    settings = {"image": "img", "role": "arn:aws:iam::123456789012:role/r", "instance_type": "ml.c5.xlarge",
                "async_output_path": "s3://demo/out", "async_failure_path": "s3://demo/failed",
                "async_success_topic": "arn:aws:sns:us-east-1:123456789012:ok",
                "async_error_topic": "arn:aws:sns:us-east-1:123456789012:failed",
                "async.instance_count": 2, "async.max_concurrent_invocations_per_instance": 4}
    deployer = SageMakerAsyncDeployer(client, poll_s=0.0, sleep=lambda s: None)
    deployer.check(settings, lambda key: f"endpoint.{key}")
    d = Deployment(index=1, key="abcdef123456", settings=settings, run_dir=tmp_path)
    deployer.prepare(d, "sw")
    name = d.endpoint_name
    config = {"OutputConfig": {"S3OutputPath": "s3://demo/out", "S3FailurePath": "s3://demo/failed",
                               "NotificationConfig": {"SuccessTopic": "arn:aws:sns:us-east-1:123456789012:ok",
                                                      "ErrorTopic": "arn:aws:sns:us-east-1:123456789012:failed"}},
              "ClientConfig": {"MaxConcurrentInvocationsPerInstance": 4}}
    assert async_inference_config(settings) == config
    arn = "arn:aws:sagemaker:us-east-1:123456789012:x/" + name
    with Stubber(client) as stub:
        stub.add_response("create_model", {"ModelArn": arn}, {"ModelName": name, "Tags": ANY,
                                                              "PrimaryContainer": ANY, "ExecutionRoleArn": ANY})
        stub.add_response("create_endpoint_config", {"EndpointConfigArn": arn}, {
            "EndpointConfigName": name, "Tags": [{"Key": "sm-locust:sweep", "Value": "sw"}],
            "ProductionVariants": [{"VariantName": "AllTraffic", "ModelName": name, "InstanceType": "ml.c5.xlarge",
                                    "InitialInstanceCount": 2, "InitialVariantWeight": 1.0}],
            "AsyncInferenceConfig": config})
        stub.add_response("create_endpoint", {"EndpointArn": arn}, {"EndpointName": name, "EndpointConfigName": name,
                                                                   "Tags": ANY})
        stub.add_response("describe_endpoint", {"EndpointName": name, "EndpointArn": arn, "EndpointStatus": "InService",
                                                "CreationTime": 0, "LastModifiedTime": 0}, {"EndpointName": name})
        deployer.deploy(d, threading.Event(), lambda line: None)
        stub.add_response("delete_endpoint", {}, {"EndpointName": name})
        stub.add_client_error("describe_endpoint", "ValidationException", f"Could not find endpoint {name}")
        stub.add_response("delete_endpoint_config", {}, {"EndpointConfigName": name})
        stub.add_response("delete_model", {}, {"ModelName": name})
        assert deployer.teardown(d, lambda line: None) == []
        stub.assert_no_pending_responses()
    assert d.info["instance_count"] == 2 and d.info["async_inference_config"] == config
    assert "2 x ml.c5.xlarge" in deployer.describe(settings) and "MaxConcurrentInvocationsPerInstance 4" in \
        deployer.describe(settings)
    assert [(n.instance_type, n.instances) for n in deployer.creation_needs([settings, settings], 2)] == [
        ("ml.c5.xlarge", 4)]


def test_the_example_file_loads_as_a_two_by_two_async_sweep(tmp_path):
    sweep = load_sweep(ROOT / "examples" / "sweeps" / "async.yaml", out=tmp_path / "out")
    assert sweep.spec.kind == "async" and len(sweep.configurations) == 4
    assert sweep.plan.given["time_to_result_slo_ms"] == 2000.0 and sweep.plan.shape == "async"
    assert [sweep.prices[c.index].instance_count for c in sweep.configurations] == [1, 1, 2, 2]
