"""Serverless sweeps on `deploy: sagemaker` against a moto server (control plane and CloudWatch), with
the runtime calls going to a local endpoint running the serverless emulation
(AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME): the endpoint config carries a ServerlessConfig, the sweep runs
its three tests and deletes everything; ModelSetupTime is read back from CloudWatch, also as the
local emulation publishes it there."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime
from types import SimpleNamespace

import boto3
import pytest

from sm_locust.cli import main
from sm_locust.endpoint.server import LocalEndpoint
from sm_locust.endpoint.serverless import ServerlessConfig
from sm_locust.sweep.deployers import Deployment
from sm_locust.sweep.serverless.collect import cloudwatch_ms
from sm_locust.sweep.serverless.deploy import SageMakerServerlessDeployer
from tests.conftest import SAMPLE_PAYLOAD, assert_one_line_error, run_cli
from tests.fakes import NOTHING, leftovers, moto_sagemaker

pytestmark = pytest.mark.e2e  # every test here starts a server, a process or Locust

SWEEP = """\
name: sls-aws
deploy: sagemaker
endpoint: {model_name: my-model}
serverless:
  memory_size_mb: 2048
  max_concurrency: 2
  cold_start_ms: 300               # local emulation only: not sent to SageMaker
tests: [stability, concurrency, cold_start]
concurrency_multipliers: [1, 2]
cold_start: {rounds: 1, gap_s: 1.5}
load: {payload: body.json, run_time: 2s}
compare_instance: {instance_type: ml.c5.large, price_per_hour: 0.119}
report: false
"""


@pytest.fixture(scope="module")
def runtime():
    """The runtime every configuration's calls reach: a serverless emulation idle-reclaiming after 1 s."""
    config = ServerlessConfig(memory_mb=2048, max_concurrency=2, idle_timeout_s=1.0)
    with LocalEndpoint(service_time_ms=30, cold_start_ms=300, serverless=config) as ep:
        yield ep


@pytest.fixture
def aws(moto_url, runtime, monkeypatch, tmp_path):
    client = moto_sagemaker(moto_url, runtime.url, monkeypatch)
    (tmp_path / "body.json").write_bytes(SAMPLE_PAYLOAD.read_bytes())
    return client


def test_the_endpoint_config_carries_a_serverless_config(aws, tmp_path):
    deployer = SageMakerServerlessDeployer(aws, poll_s=0.05)
    d = Deployment(1, "abcdef123456", {"model_name": "my-model", "serverless.memory_size_mb": 4096,
                                       "serverless.max_concurrency": 8, "serverless.cold_start_ms": 700}, tmp_path)
    deployer.prepare(d, "slstest")
    lines: list[str] = []
    deployer.deploy(d, threading.Event(), lines.append)
    variant = aws.describe_endpoint_config(EndpointConfigName=d.resources["endpoint_config"])["ProductionVariants"][0]
    assert variant["ServerlessConfig"] == {"MemorySizeInMB": 4096, "MaxConcurrency": 8}
    assert "InstanceType" not in variant
    assert d.info["memory_size_mb"] == 4096 and d.info["max_concurrency"] == 8
    arn = aws.describe_endpoint(EndpointName=d.endpoint_name)["EndpointArn"]
    assert {"Key": "sm-locust:sweep", "Value": "slstest"} in aws.list_tags(ResourceArn=arn)["Tags"]
    assert deployer.teardown(d, lines.append) == []
    assert leftovers(aws) == NOTHING


def test_a_serverless_sweep_on_sagemaker_runs_its_tests_and_deletes_everything(aws, tmp_path, capsys, monkeypatch):
    (tmp_path / "sls.yaml").write_text(SWEEP)
    monkeypatch.chdir(tmp_path)
    # the plan and the refusal in this process (the CLI's own entry point; a Python start less each)
    assert main(["sweep", "sls.yaml", "--plan"]) == 0
    plan = capsys.readouterr()
    assert ("serverless 2048 MB, MaxConcurrency 2, clone of model my-model (cold_start_ms: local emulation only"
            in plan.out), plan.err
    assert leftovers(aws) == NOTHING
    code = main(["sweep", "sls.yaml", "--out", "out"])  # stdin is no terminal here either
    refused = capsys.readouterr()
    assert_one_line_error(SimpleNamespace(returncode=code, stdout=refused.out, stderr=refused.err), 2, "pass --yes")
    assert not (tmp_path / "out").exists()
    r = run_cli("sweep", "sls.yaml", "--yes", "--out", "out", cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    (c,) = json.loads((tmp_path / "out" / "sweep.json").read_text())["configurations"]
    assert c["status"] == "ok" and c["deployed"]["memory_size_mb"] == 2048
    assert c["throttle_rate"]["1"] <= 0.05 < c["throttle_rate"]["2"]
    assert c["cold_start_p50_ms"] >= 300  # the runtime reclaimed both instances in the 1.5 s gap
    assert c["model_setup_time"]["source"] == "CloudWatch"  # the runtime here publishes none: named, not invented
    assert c["cost"]["duration_source"].startswith("mean warm latency")  # no ModelLatency in CloudWatch either
    assert c["break_even_rps"] > 0
    assert leftovers(aws) == NOTHING


def test_model_setup_time_is_read_from_cloudwatch(moto_url, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL_CLOUDWATCH", moto_url)
    cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
    now = time.time()
    stamp = datetime.fromtimestamp(now // 60 * 60, UTC)
    dims = [{"Name": "EndpointName", "Value": "sls-ep"}, {"Name": "VariantName", "Value": "AllTraffic"}]
    cloudwatch.put_metric_data(Namespace="AWS/SageMaker", MetricData=[{
        "MetricName": "ModelSetupTime", "Dimensions": dims, "Timestamp": stamp, "Unit": "Microseconds",
        "StatisticValues": {"SampleCount": 4, "Sum": 2_800_000, "Minimum": 650_000, "Maximum": 760_000}}])
    got = cloudwatch_ms(cloudwatch, "ModelSetupTime", "sls-ep", "AllTraffic", now - 5, now + 5)
    assert got == {"source": "CloudWatch", "count": 4, "average_ms": 700.0, "maximum_ms": 760.0}
    assert cloudwatch_ms(cloudwatch, "ModelSetupTime", "other", "AllTraffic", now - 5, now + 5)["count"] == 0


def test_an_instance_type_on_a_serverless_sagemaker_sweep_is_refused(aws, tmp_path):
    (tmp_path / "sls.yaml").write_text(SWEEP.replace("endpoint: {model_name: my-model}",
                                                     "endpoint: {model_name: my-model, instance_type: ml.c5.large}"))
    assert_one_line_error(run_cli("sweep", "sls.yaml", "--plan", cwd=tmp_path), 2,
                          "endpoint.instance_type: a serverless endpoint has no instances")
    assert leftovers(aws) == NOTHING


def test_the_emulation_publishes_model_setup_time_to_the_cloudwatch_stand_in(moto_url, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL_CLOUDWATCH", moto_url)
    config = ServerlessConfig(memory_mb=6144, max_concurrency=2, idle_timeout_s=0.5)
    start = time.time()
    with LocalEndpoint(service_time_ms=10, cold_start_ms=250, serverless=config, cloudwatch_url=moto_url,
                       metrics_interval_s=1, metrics_endpoint_name="sls-pub") as ep:
        runtime = boto3.client("sagemaker-runtime", endpoint_url=ep.url, region_name="us-east-1")
        for _ in range(2):  # two cold starts: new, then reclaimed after the idle timeout
            runtime.invoke_endpoint(EndpointName="any", Body=SAMPLE_PAYLOAD.read_bytes(),
                                    ContentType="application/json")
            time.sleep(0.7)
    # stopped: the last window is flushed
    got = cloudwatch_ms(boto3.client("cloudwatch", region_name="us-east-1"), "ModelSetupTime", "sls-pub", "AllTraffic",
                        start, time.time())
    assert (got["count"], got["average_ms"], got["maximum_ms"]) == (2, 250.0, 250.0)
