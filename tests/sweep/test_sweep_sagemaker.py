"""The sagemaker deployer against a moto server (SageMaker control plane on 127.0.0.1), with the
runtime calls going to a local endpoint through AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME.

Covered: the issue's second example file as written; a clone carries the configuration's
environment; control-plane errors (ResourceLimitExceeded, an endpoint that fails with a
FailureReason) fail one configuration and the sweep goes on, with everything deleted; an endpoint
still Creating is deleted once it leaves Creating; a sweep interrupted with SIGINT leaves no
endpoint, endpoint config or cloned model; `--cleanup` deletes by tag; no `--yes`, nothing created.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest
from botocore.exceptions import ClientError

from sm_locust.cli import main
from sm_locust.report.cost import DEFAULT_SAFETY_FACTOR, instances_needed
from sm_locust.sweep.api import load_sweep, run_sweep
from sm_locust.sweep.deployers import Cancelled, Deployment
from sm_locust.sweep.deployers.sagemaker import SageMakerDeployer
from tests.conftest import SAMPLE_PAYLOAD, run_cli
from tests.fakes import NOTHING, ROLE, leftovers, moto_sagemaker
from tests.starved import skip_if_the_load_generator_was_the_bottleneck

pytestmark = pytest.mark.e2e  # every test here starts a server, a process or Locust

EXAMPLE_TWO = """\
name: workers
deploy: sagemaker
endpoint:
  model_name: my-model         # an existing SageMaker Model, cloned per configuration with its env
  instance_type: ml.c5.xlarge
  instance_count: 1
grid:
  environment.SAGEMAKER_MODEL_SERVER_WORKERS: [1, 2, 4]
  instance_type: [ml.c5.xlarge, ml.c5.2xlarge]
load: {payload: body.json, users: 2, run_time: 8s}
objective: {target_rps: 50, slo_ms: 500, percentile: 95}
"""


@pytest.fixture
def aws(moto_url, runtime, monkeypatch, tmp_path):
    """Control plane -> moto (reset), runtime -> the local endpoint, CloudWatch -> moto; my-model exists."""
    client = moto_sagemaker(moto_url, runtime.url, monkeypatch, environment={"OMP_NUM_THREADS": "1"})
    (tmp_path / "body.json").write_bytes(SAMPLE_PAYLOAD.read_bytes())
    return client


def test_example_two_as_written(aws, tmp_path, capsys):
    (tmp_path / "workers.yaml").write_text(EXAMPLE_TWO)
    assert main(["sweep", str(tmp_path / "workers.yaml"), "--plan"]) == 0
    assert "6 configurations on sagemaker" in capsys.readouterr().out and leftovers(aws) == NOTHING
    # as written, but 2-s runs instead of 8-s ones (the suite's time budget) and a target of 5 req/s: at
    # 50 req/s and safety factor 0.5 one instance must serve 100 req/s with 2 users, which a busy machine's
    # local endpoint does not (CI beside a CPU hog measured less, and two instances of the cheaper type
    # cost what one of the dearer does). At 5 req/s every configuration needs one instance, so the
    # cheaper type wins whatever the machine.
    r = run_cli("sweep", "workers.yaml", "--yes", "--set", "load.run_time=2s", "--set", "objective.target_rps=5",
                "--out", "out", cwd=tmp_path, timeout=180)
    assert leftovers(aws) == NOTHING, r.stdout + r.stderr  # whatever the measurement said
    doc = json.loads((tmp_path / "out" / "sweep.json").read_text())
    skip_if_the_load_generator_was_the_bottleneck(doc, r)  # a starved machine: INCONCLUSIVE is right
    assert r.returncode == 0, r.stdout + r.stderr
    assert [c["status"] for c in doc["configurations"]] == ["ok"] * 6
    for c in doc["configurations"]:  # one definition: the figure is the cost module's, from the measured capacity
        assert c["capacity_rps"] > 0
        assert c["instances_needed"] == instances_needed(5, c["capacity_rps"], DEFAULT_SAFETY_FACTOR)
    assert all(c["instances_needed"] == 1 for c in doc["configurations"]), \
        [(c["capacity_rps"], c["instances_needed"]) for c in doc["configurations"]]
    assert doc["recommendation"]["settings"]["instance_type"] == "ml.c5.xlarge"  # same capacity, half the price
    assert "sm-locust sweep: recommendation: SAGEMAKER_MODEL_SERVER_WORKERS" in r.stdout
    for c in doc["configurations"]:
        assert (tmp_path / "out" / c["run_dir"] / "summary.json").exists()
        assert c["deployed"]["resources"]["model"].startswith("workers-")
    assert leftovers(aws) == NOTHING


def test_a_clone_carries_the_configuration_environment_and_tags(aws, tmp_path):
    deployer = SageMakerDeployer(aws, poll_s=0.05)
    d = Deployment(1, "abcdef123456", {"model_name": "my-model", "instance_type": "ml.c5.xlarge",
                                       "environment.SAGEMAKER_MODEL_SERVER_WORKERS": 4}, tmp_path)
    deployer.prepare(d, "envtest")
    lines: list[str] = []
    deployer.deploy(d, threading.Event(), lines.append)
    model = aws.describe_model(ModelName=d.resources["model"])
    assert model["PrimaryContainer"]["Environment"] == {"OMP_NUM_THREADS": "1", "SAGEMAKER_MODEL_SERVER_WORKERS": "4"}
    assert model["ExecutionRoleArn"] == ROLE
    variant = aws.describe_endpoint_config(EndpointConfigName=d.resources["endpoint_config"])["ProductionVariants"][0]
    assert (variant["InstanceType"], variant["InitialInstanceCount"]) == ("ml.c5.xlarge", 1)
    arn = aws.describe_endpoint(EndpointName=d.endpoint_name)["EndpointArn"]
    assert {"Key": "sm-locust:sweep", "Value": "envtest"} in aws.list_tags(ResourceArn=arn)["Tags"]
    assert any("InService" in line for line in lines)
    assert deployer.teardown(d, lines.append) == []
    assert leftovers(aws) == NOTHING


class FailingControlPlane:
    """The moto client, except: the first CreateEndpoint hits a quota, the second endpoint fails."""

    def __init__(self, client):
        self._client = client
        self.creates = 0
        self.failed: set[str] = set()

    def __getattr__(self, name):
        return getattr(self._client, name)

    def create_endpoint(self, **kwargs):
        self.creates += 1
        if self.creates == 1:
            raise ClientError({"Error": {"Code": "ResourceLimitExceeded", "Message": "The account-level service limit "
                                         "'ml.c5.xlarge for endpoint usage' is 0 Instances"}}, "CreateEndpoint")
        answer = self._client.create_endpoint(**kwargs)
        if self.creates == 2:
            self.failed.add(kwargs["EndpointName"])
        return answer

    def describe_endpoint(self, **kwargs):
        answer = self._client.describe_endpoint(**kwargs)  # raises once it is deleted
        if kwargs["EndpointName"] in self.failed:
            return {**answer, "EndpointStatus": "Failed",
                    "FailureReason": "The primary container for production variant AllTraffic did not pass the ping "
                    "health check."}
        return answer


def test_control_plane_errors_fail_one_configuration_and_the_sweep_goes_on(aws, tmp_path):
    spec = {"name": "errors", "deploy": "sagemaker", "report": False,
            "endpoint": {"model_name": "my-model", "instance_type": "ml.c5.xlarge"},
            "grid": {"environment.SAGEMAKER_MODEL_SERVER_WORKERS": [1, 2, 4]},
            "load": {"payload": "body.json", "users": 1, "run_time": "2s"}, "objective": {"target_rps": 10}}
    client = FailingControlPlane(aws)
    sweep = load_sweep(spec, out=tmp_path / "out", client=client, base_dir=tmp_path, poll_s=0.05)
    lines: list[str] = []
    result = run_sweep(sweep, yes=True, printer=lines.append, handle_signals=False)
    rows = result.document["configurations"]
    assert [r["status"] for r in rows] == ["failed", "failed", "ok"]
    assert rows[0]["reason"].startswith("CreateEndpoint: ResourceLimitExceeded: The account-level service limit")
    assert rows[1]["reason"].endswith("Failed: The primary container for production variant AllTraffic did not pass "
                                      "the ping health check.")
    assert result.document["recommendation"]["index"] == 3, rows[2]
    assert result.exit_code == 1
    assert leftovers(aws) == NOTHING  # the quota-hit configuration's model and config were deleted too
    assert any("[1/3] SAGEMAKER_MODEL_SERVER_WORKERS 1: failed: CreateEndpoint" in line for line in lines)


class StillCreating:
    """The moto client with an endpoint that stays Creating (and refuses deletion) until released."""

    def __init__(self, client):
        self._client = client
        self.creating = True

    def __getattr__(self, name):
        return getattr(self._client, name)

    def describe_endpoint(self, **kwargs):
        answer = self._client.describe_endpoint(**kwargs)
        return {**answer, "EndpointStatus": "Creating"} if self.creating else answer

    def delete_endpoint(self, **kwargs):
        if self.creating:
            raise ClientError({"Error": {"Code": "ValidationException",
                                         "Message": "Cannot delete an endpoint in Creating status"}},
                              "DeleteEndpoint")
        return self._client.delete_endpoint(**kwargs)


def test_interrupted_creation_is_deleted_once_it_leaves_creating(aws, tmp_path):
    client = StillCreating(aws)
    deployer = SageMakerDeployer(client, poll_s=0.05, sleep=time.sleep)
    d = Deployment(1, "0123456789ab", {"model_name": "my-model", "instance_type": "ml.c5.xlarge"}, tmp_path)
    deployer.prepare(d, "creating")
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    lines: list[str] = []
    with pytest.raises(Cancelled):
        deployer.deploy(d, cancel, lines.append)
    assert any("Creating" in line for line in lines)
    threading.Timer(0.3, lambda: setattr(client, "creating", False)).start()
    assert deployer.teardown(d, lines.append) == []
    assert any("SageMaker deletes it once that ends" in line for line in lines)
    assert leftovers(aws) == NOTHING


def test_sigint_during_a_test_leaves_nothing_behind(aws, tmp_path):
    (tmp_path / "sweep.yaml").write_text(
        "name: interrupted\ndeploy: sagemaker\nreport: false\n"
        "endpoint: {model_name: my-model, instance_type: ml.c5.xlarge}\n"
        "grid: {environment.OMP_NUM_THREADS: [1, 2]}\n"
        "max_parallel_endpoints: 2\n"
        "load: {payload: body.json, users: 2, run_time: 60s}\n")
    proc = subprocess.Popen([sys.executable, "-m", "sm_locust", "sweep", "sweep.yaml", "--yes", "--out", "out"],
                            cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ))
    lines: queue.Queue = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True)
    reader.start()
    seen: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any("InService" in line for line in seen):
        try:
            seen.append(lines.get(timeout=1))
        except queue.Empty:
            pass
    assert any("InService" in line for line in seen), "".join(seen)
    def history_rows() -> int:  # Locust writes its stats history once a second while it runs
        found = list((tmp_path / "out").glob("*/locust_stats_history.csv"))
        return len(found[0].read_text().splitlines()) if found else 0

    while time.monotonic() < deadline and history_rows() < 3:
        time.sleep(0.2)
    assert history_rows() >= 3, "the first configuration's test did not start"
    assert leftovers(aws)["endpoints"], "both endpoints should be alive (max_parallel_endpoints 2)"
    proc.send_signal(signal.SIGINT)
    assert proc.wait(60) == 130
    reader.join(10)  # its output ends when it exits (not a fixed second of silence)
    while not lines.empty():
        seen.append(lines.get_nowait())
    assert leftovers(aws) == NOTHING, "".join(seen)
    doc = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert doc["interrupted"] is True
    assert {c["status"] for c in doc["configurations"]} == {"interrupted"}
    assert not [p for p in psutil.process_iter(["cmdline"])
                if str(tmp_path / "out") in " ".join(p.info["cmdline"] or [])]


def test_no_yes_no_terminal_creates_nothing(aws, tmp_path):
    (tmp_path / "workers.yaml").write_text(EXAMPLE_TWO)
    r = subprocess.run([sys.executable, "-m", "sm_locust", "sweep", "workers.yaml"], cwd=tmp_path,
                       stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and r.stderr.startswith("sm-locust: error: this sweep would create 6 "
                                                                     "sagemaker endpoints")
    assert leftovers(aws) == NOTHING


def test_cleanup_deletes_what_carries_the_tag(aws, tmp_path):
    def make(name, sweep_id=None):
        tags = [{"Key": "sm-locust:sweep", "Value": sweep_id}] if sweep_id else []
        aws.create_model(ModelName=name, ExecutionRoleArn=ROLE, PrimaryContainer={"Image": "i"}, Tags=tags)
        aws.create_endpoint_config(EndpointConfigName=name, Tags=tags, ProductionVariants=[{
            "VariantName": "AllTraffic", "ModelName": name, "InstanceType": "ml.c5.xlarge", "InitialInstanceCount": 1}])
        aws.create_endpoint(EndpointName=name, EndpointConfigName=name, Tags=tags)

    make("crashed-aaaaaa-1", "crashed")
    make("crashed-bbbbbb-2", "crashed")
    make("crashed-2-cccccc-3", "crashed-2")  # another sweep whose id contains this one
    make("crashed-untagged")
    r = run_cli("sweep", "--cleanup", "crashed")
    assert r.returncode == 0, r.stderr
    assert "deleted 6" in r.stdout
    left = leftovers(aws)
    assert sorted(left["endpoints"]) == ["crashed-2-cccccc-3", "crashed-untagged"]
    assert sorted(left["models"]) == ["crashed-2-cccccc-3", "crashed-untagged"]
