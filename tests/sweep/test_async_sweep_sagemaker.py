"""An async sweep on `deploy: sagemaker` against a moto server (control plane, S3, CloudWatch), its runtime
calls going to a local async endpoint (AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME): each configuration's endpoint
config carries AsyncInferenceConfig and its instance count, every configuration is measured, and nothing is
left behind. (The local endpoint stands in for every configuration's runtime: the figures are its own.)"""

from __future__ import annotations

import json

import boto3
import pytest

from sm_locust.endpoint.asyncqueue import AsyncEndpointConfig
from sm_locust.endpoint.server import LocalEndpoint
from tests.conftest import SAMPLE_PAYLOAD, run_cli
from tests.fakes import NOTHING, leftovers, moto_sagemaker

pytestmark = pytest.mark.e2e  # a moto server, a local endpoint and Locust

BUCKET = "async-sm"
SWEEP = f"""\
name: async-aws
deploy: sagemaker
endpoint: {{model_name: my-model, instance_type: ml.c5.xlarge, async_output_path: 's3://{BUCKET}/out'}}
async:
  instance_count: [1, 2]
  max_concurrent_invocations_per_instance: 2
load: {{payload: {SAMPLE_PAYLOAD}, async_input_location: 's3://{BUCKET}/in/request.json', async_result: s3,
        async_poll_ms: 40, start_rps: 2, max_rps: 4, step_seconds: 6}}
objective: {{slo_ms: 2000, percentile: 50}}
report: false
"""


def test_each_configuration_is_an_async_endpoint_config_and_nothing_is_left(moto_url, monkeypatch, tmp_path):
    queue = AsyncEndpointConfig(output_path=f"s3://{BUCKET}/out", max_concurrent=4, s3_url=moto_url)
    with LocalEndpoint(log_path=tmp_path / "endpoint.log", service_time_ms=50, async_inference=queue) as runtime:
        client = moto_sagemaker(moto_url, runtime.url, monkeypatch)
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", moto_url)
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        s3.put_object(Bucket=BUCKET, Key="in/request.json", Body=SAMPLE_PAYLOAD.read_bytes())
        (tmp_path / "s.yaml").write_text(SWEEP)
        r = run_cli("sweep", "s.yaml", "--yes", "--out", "out", cwd=tmp_path, timeout=600)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    document = json.loads((tmp_path / "out" / "sweep.json").read_text())
    rows = document["configurations"]
    assert [row["status"] for row in rows if row["status"] not in ("ok", "inconclusive")] == [], rows
    for row, instances in zip(rows, (1, 2), strict=True):
        deployed = row["deployed"]
        assert deployed["instance_count"] == instances == row["instance_count"]
        assert deployed["async_inference_config"] == {"OutputConfig": {"S3OutputPath": f"s3://{BUCKET}/out"},
                                                      "ClientConfig": {"MaxConcurrentInvocationsPerInstance": 2}}
        assert set(deployed["resources"]) == {"endpoint", "endpoint_config", "model"} and "left_behind" not in row
        assert row["accepted"] > 0 and row["steps"], row
    assert leftovers(client) == NOTHING
