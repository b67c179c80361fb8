"""Before a SageMaker sweep creates anything (issue 23 item 7): the pure rules on synthetic data, then
`check_before_creating` against moto's SageMaker and botocore's Stubber for Service Quotas (moto
has no Service Quotas), then a sweep that would have failed at CreateEndpoint: refused in one line,
exit 2, nothing created; and a teardown reports only what was created."""

from __future__ import annotations

import threading

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from sm_locust.cli import main
from sm_locust.errors import UsageError
from sm_locust.sweep.api import load_sweep, run_sweep
from sm_locust.sweep.deployers import Deployment
from sm_locust.sweep.deployers.precheck import (
    FAILED,
    OK,
    UNKNOWN,
    Need,
    Precheck,
    check_before_creating,
    needs_for,
    quota_checks,
)
from sm_locust.sweep.deployers.sagemaker import SageMakerDeployer
from tests.conftest import SAMPLE_PAYLOAD
from tests.fakes import NOTHING, leftovers, moto_sagemaker

C5 = "ml.c5.xlarge for endpoint usage"


def quota(name: str, value: float) -> dict:
    return {"ServiceCode": "sagemaker", "QuotaName": name, "QuotaCode": "L-TEST0001", "Value": value}


def stubbed_quotas(applied: list[dict] | None = None, defaults: list[dict] | None = None,
                   error: str | None = None):
    """A Service Quotas client answering from a Stubber (default values first, then the applied ones)."""
    client = boto3.client("service-quotas", region_name="us-east-1")
    stub = Stubber(client)
    if error:
        stub.add_client_error("list_aws_default_service_quotas", service_error_code=error,
                              service_message="not allowed")
    else:
        stub.add_response("list_aws_default_service_quotas", {"Quotas": defaults or []}, {"ServiceCode": "sagemaker"})
        stub.add_response("list_service_quotas", {"Quotas": applied or []}, {"ServiceCode": "sagemaker"})
    stub.activate()
    return client


# -- pure ----------------------------------------------------------------------------------------

def test_what_a_sweep_holds_at_once_per_instance_type():
    configurations = [{"instance_type": "ml.c5.xlarge", "instance_count": 2, "model_name": "m"},
                      {"instance_type": "ml.c5.xlarge", "instance_count": 1, "model_name": "m"},
                      {"instance_type": "ml.c5.xlarge", "instance_count": 3, "model_name": "m"},
                      {"instance_type": "ml.g5.xlarge", "model_name": "m"}]
    assert needs_for(configurations, max_parallel=2) == [Need("ml.c5.xlarge", 5, "m"), Need("ml.g5.xlarge", 1, "m")]
    assert needs_for(configurations, max_parallel=1)[0].instances == 3
    assert needs_for([{"memory_mb": 2048}], 2) == []  # serverless: no instance type


def test_each_quota_against_what_the_sweep_holds():
    checks = quota_checks([Need("ml.c5.xlarge", 4), Need("ml.g5.xlarge", 1), Need("ml.p9.huge", 1)],
                          {C5: 2.0, "ml.g5.xlarge for endpoint usage": 1.0}, "us-east-1")
    assert [c.status for c in checks] == [FAILED, OK, UNKNOWN]
    assert "is 2 in us-east-1, the sweep holds 4 at once" in checks[0].detail
    result = Precheck(checks)
    with pytest.raises(UsageError) as info:
        result.raise_for_failures()
    assert info.value.exit_code == 2
    assert info.value.message.startswith(f"before creating anything: quota {C5!r}: is 2 in us-east-1")
    assert [line.split()[0] for line in result.table()] == ["failed", "ok", "unknown"]


# -- against moto (SageMaker) and a Stubber (Service Quotas) ---------------------------------------

@pytest.fixture
def sagemaker(moto_url, monkeypatch, endpoint):
    return moto_sagemaker(moto_url, endpoint.url, monkeypatch)


@pytest.mark.e2e
def test_every_check_passes_for_a_sweep_that_can_run(sagemaker):
    quotas = stubbed_quotas(applied=[quota(C5, 10)], defaults=[quota(C5, 2)])
    result = check_before_creating([Need("ml.c5.xlarge", 4, "my-model")], sagemaker=sagemaker, quotas=quotas)
    assert [(c.item, c.status) for c in result.checks] == [
        ("credentials", OK), ("model 'my-model'", OK), ("instance type ml.c5.xlarge", OK), (f"quota {C5!r}", OK)]
    assert "10 >= 4 at once" in result.checks[-1].detail  # the applied value, not the default


@pytest.mark.e2e
@pytest.mark.parametrize(("need", "quotas", "item", "status", "needle"), [
    (Need("ml.c5.xlarge", 4, "no-such-model"), dict(applied=[quota(C5, 10)]), "model 'no-such-model'", FAILED,
     "does not exist in us-east-1"),
    (Need("ml.c5.xlargee", 1, "my-model"), dict(applied=[quota(C5, 10)]), "instance type ml.c5.xlargee", FAILED,
     "no such instance type"),
    (Need("ml.c5.xlarge", 4, "my-model"), dict(defaults=[quota(C5, 2)]), f"quota {C5!r}", FAILED,
     "is 2 in us-east-1, the sweep holds 4"),
    (Need("ml.c5.xlarge", 4, "my-model"), dict(error="AccessDeniedException"), f"quota {C5!r}", UNKNOWN,
     "could not be read (AccessDeniedException"),
], ids=["no model", "bad instance type", "quota too small", "quota unreadable"])
def test_what_would_stop_the_sweep_is_named(sagemaker, need, quotas, item, status, needle):
    result = check_before_creating([need], sagemaker=sagemaker, quotas=stubbed_quotas(**quotas))
    found = {c.item: c for c in result.checks}
    assert found[item].status == status and needle in found[item].detail, result.table()


def test_no_credentials_and_no_region_fail_before_any_call(monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    result = check_before_creating([Need("ml.c5.xlarge", 1, "m")])
    assert [(c.item, c.status) for c in result.checks] == [("credentials", FAILED)]
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    result = check_before_creating([Need("ml.c5.xlarge", 1, "m")])
    assert [(c.item, c.status) for c in result.checks] == [("region", FAILED)]


# -- the sweep ------------------------------------------------------------------------------------

SWEEP = """\
name: quota
deploy: sagemaker
max_parallel_endpoints: 2
endpoint: {{model_name: {model}, instance_type: ml.c5.xlarge, instance_count: 2}}
grid: {{environment.WORKERS: [1, 2]}}
load: {{payload: {payload}, users: 1, run_time: 2s}}
objective: {{target_rps: 10, slo_ms: 500}}
"""


@pytest.mark.e2e
def test_a_sweep_the_quota_cannot_hold_is_refused_before_anything_is_created(sagemaker, tmp_path, capsys):
    """Was: CreateEndpoint's ResourceLimitExceeded, configuration after configuration."""
    (tmp_path / "sweep.yaml").write_text(SWEEP.format(model="my-model", payload=SAMPLE_PAYLOAD))
    sweep = load_sweep(tmp_path / "sweep.yaml", out=tmp_path / "out", client=sagemaker, poll_s=0.05)
    sweep.deployer.quotas_client = stubbed_quotas(applied=[quota(C5, 3)])
    with pytest.raises(UsageError) as info:
        run_sweep(sweep, yes=True, handle_signals=False)
    assert info.value.exit_code == 2
    assert f"quota {C5!r}: is 3 in us-east-1, the sweep holds 4 at once" in info.value.message
    assert leftovers(sagemaker) == NOTHING
    table = capsys.readouterr().out
    assert "before creating anything:" in table and "failed   quota" in table and "ok       model 'my-model'" in table


def test_a_sweep_without_credentials_is_one_line_and_reports_nothing_left(tmp_path, monkeypatch, capsys):
    """Was: six resources "NOT deleted" that were never created."""
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sweep.yaml").write_text(SWEEP.format(model="my-model", payload=SAMPLE_PAYLOAD))
    assert main(["sweep", "sweep.yaml", "--yes", "--out", "out"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["sm-locust: error: before creating anything: credentials: none found: configure them (aws "
                   "configure, AWS_PROFILE, or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY); nothing was created"]


class RefusingClient:
    """A SageMaker client whose `fail_at` create call fails the given way; the rest answer (an endpoint
    described after its delete is gone)."""

    def __init__(self, failure: Exception, fail_at: str):
        self.failure, self.fail_at, self.deleted = failure, fail_at, []
        self.meta = type("Meta", (), {"region_name": "us-east-1"})()

    def describe_model(self, **_kw):
        return {"PrimaryContainer": {"Image": "img"}, "ExecutionRoleArn": "arn:aws:iam::1:role/r"}

    def __getattr__(self, name):
        def call(**kwargs):
            if name.startswith("delete_"):
                self.deleted.append(name)
                return {}
            if name == self.fail_at:
                raise self.failure
            return {}

        return call


@pytest.mark.parametrize(("failure", "deleted"), [
    (ClientError({"Error": {"Code": "ResourceLimitExceeded", "Message": "quota"}}, "CreateEndpoint"),
     ["delete_endpoint_config", "delete_model"]),  # SageMaker said no: the endpoint was never made
    (ConnectionResetError("lost"), ["delete_endpoint", "delete_endpoint_config", "delete_model"]),  # no answer
], ids=["refused", "no answer"])
def test_teardown_deletes_what_was_created_only(failure, deleted, tmp_path):
    client = RefusingClient(failure, "create_endpoint")
    deployer = SageMakerDeployer(client, poll_s=0.01, sleep=lambda s: None)
    deployment = Deployment(0, "k", {"model_name": "m", "instance_type": "ml.c5.xlarge"}, tmp_path)
    deployer.prepare(deployment, "sweep1")
    with pytest.raises(Exception):  # noqa: B017  (a DeployError, or the lost connection itself)
        deployer.deploy(deployment, threading.Event(), lambda text: None)
    assert deployer.teardown(deployment, lambda text: None) == []
    assert client.deleted == deleted
