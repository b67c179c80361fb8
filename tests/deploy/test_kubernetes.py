"""deploy/kubernetes proved without a cluster: rendered, validated, and its pods run as local processes.

Every overlay is rendered with `kubectl kustomize` and each object validated against the schemas
of a pinned Kubernetes version (the `kubernetes-validate` package ships them; strict: unknown
fields are errors). Rules that the schemas do not know are checked on the rendered objects: no
credentials and no LoadBalancer, non-root containers with a read-only root filesystem and
requests and limits, every written path on an emptyDir, the worker's --master-host naming the
master Service, one worker process per requested CPU, and a headless master that waits for
replicas x CPUs workers.

Then, as tests/deploy/test_compose.py does for docker-compose.yml, the pods' commands and environment are
taken from the rendered objects and run as local processes: a kustomize overlay of the test's own
(on a copy of deploy/kubernetes) points the options at a local endpoint and a moto S3 server and
shortens the run, then the master Job and 2 worker pods run against them. What stands in for the
cluster: Service names and 0.0.0.0 become 127.0.0.1, container ports become free ports, volumes
become folders (emptyDir: empty, configMap: its files), the image's working directory is built
from the Dockerfile's WORKDIR and COPY lines, `$(VAR)` is expanded as the kubelet does, and the
conftest sandbox's placeholder keys stand in for the ServiceAccount's IAM role.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

import sm_locust
from sm_locust.util.ports import free_port
from tests.conftest import ROOT
from tests.fakes import MotoServer, stop_processes, wait_exit

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed: it ships kustomize, which renders "
                                "deploy/kubernetes (https://kubernetes.io/docs/tasks/tools/)")

DEPLOY = ROOT / "deploy" / "kubernetes"
OVERLAYS = sorted(p.name for p in (DEPLOY / "overlays").iterdir() if (p / "kustomization.yaml").exists())
# The schemas' Kubernetes version: EKS standard support at the time of writing, and kubectl's here.
KUBERNETES_VERSION = "1.32"
POD_OWNERS = {"Deployment", "Job", "StatefulSet", "DaemonSet"}
CREDENTIAL_NAMES = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"}
BUCKET = "sm-locust-k8s"


# -- rendering and reading the rendered objects -------------------------------------------------------

def render(path: Path) -> list[dict]:
    result = subprocess.run([KUBECTL, "kustomize", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


class Manifests:
    """The objects of one rendering, looked up by kind and name."""

    def __init__(self, docs: list[dict]):
        self.docs = docs

    def get(self, kind: str, name: str) -> dict:
        found = [d for d in self.docs if d["kind"] == kind and d["metadata"]["name"] == name]
        assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
        return found[0]

    def of_kind(self, kind: str) -> list[dict]:
        return [d for d in self.docs if d["kind"] == kind]

    def workloads(self) -> list[dict]:
        return [d for d in self.docs if d["kind"] in POD_OWNERS]

    def master(self) -> dict:
        found = [w for w in self.workloads()
                 if w["spec"]["template"]["metadata"]["labels"].get("app.kubernetes.io/component") == "master"]
        assert len(found) == 1, [w["metadata"]["name"] for w in found]
        return found[0]

    def worker(self) -> dict:
        return self.get("Deployment", "sm-locust-worker")

    def configmap(self, name: str) -> dict[str, str]:
        return dict(self.get("ConfigMap", name).get("data") or {})


def pod_spec(workload: dict) -> dict:
    return workload["spec"]["template"]["spec"]


def only_container(workload: dict) -> dict:
    containers = pod_spec(workload)["containers"]
    assert len(containers) == 1
    return containers[0]


def cores(quantity: str) -> float:
    """A CPU quantity ("500m", "2") in cores."""
    text = str(quantity)
    return int(text[:-1]) / 1000 if text.endswith("m") else float(text)


_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(text: str, env: dict[str, str]) -> str:
    """The kubelet's $(VAR) expansion: defined variables replaced, others left as written, $$ -> $."""
    return _REF.sub(lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), text)


def container_env(manifests: Manifests, container: dict) -> dict[str, str]:
    """The environment the kubelet would give the container (envFrom, then env in order)."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        assert set(source) <= {"configMapRef", "prefix"}, f"unsupported envFrom {source}"
        env.update({source.get("prefix", "") + k: v
                    for k, v in manifests.configmap(source["configMapRef"]["name"]).items()})
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = expand(item["value"], env)
            continue
        ref = item["valueFrom"]
        if "configMapKeyRef" in ref:
            env[item["name"]] = manifests.configmap(ref["configMapKeyRef"]["name"])[ref["configMapKeyRef"]["key"]]
        elif "resourceFieldRef" in ref:
            field = ref["resourceFieldRef"]
            kind, resource = field["resource"].split(".")
            value = cores(container["resources"][kind][resource]) / cores(field.get("divisor", "1"))
            env[item["name"]] = str(math.ceil(value))  # the kubelet rounds up
        else:
            raise AssertionError(f"unsupported valueFrom {ref}")
    return env


def argv(container: dict, env: dict[str, str]) -> list[str]:
    return [expand(str(a), env) for a in container.get("command", []) + container.get("args", [])]


def image_layout() -> tuple[str, dict[str, Path]]:
    """The image's WORKDIR and what the Dockerfile copies into it (container path -> repository path)."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    workdir = re.findall(r"^WORKDIR\s+(\S+)", dockerfile, re.M)[-1]
    copies = {}
    for source, target in re.findall(r"^COPY\s+(?!--)(\S+)\s+(\S+)\s*$", dockerfile, re.M):
        if target.startswith("./"):
            copies[f"{workdir}/{target[2:].rstrip('/')}"] = ROOT / source
    return workdir, copies


def mounts(workload: dict, container: dict) -> dict[str, dict]:
    """mountPath -> the pod volume mounted there."""
    volumes = {v["name"]: v for v in pod_spec(workload).get("volumes", [])}
    return {m["mountPath"]: volumes[m["name"]] for m in container.get("volumeMounts", [])}


def under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


# -- every overlay: renders, validates, follows the rules --------------------------------------------

@pytest.fixture(scope="module")
def rendered() -> dict[str, Manifests]:
    return {name: Manifests(render(DEPLOY / "overlays" / name)) for name in OVERLAYS}


def test_there_are_headless_and_webui_overlays():
    assert {"headless", "webui"} <= set(OVERLAYS)


@pytest.mark.e2e
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_validates_against_the_pinned_kubernetes_schemas(rendered, overlay):
    kinds = set()
    for doc in rendered[overlay].docs:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)  # raises with the path of the first error
        kinds.add(doc["kind"])
    assert {"ServiceAccount", "Service", "ConfigMap", "Deployment"} <= kinds


@pytest.mark.e2e
def test_the_schema_validation_is_not_a_no_op(rendered):
    broken = copy.deepcopy(rendered["headless"].worker())
    broken["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)
    unknown = copy.deepcopy(rendered["headless"].worker())
    only_container(unknown)["securityContext"]["runAsRoot"] = False  # a typo'd field: strict rejects it
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(unknown, KUBERNETES_VERSION, strict=True)


@pytest.mark.e2e
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_credentials_and_nothing_exposed(rendered, overlay):
    manifests = rendered[overlay]
    text = yaml.safe_dump_all(manifests.docs)
    assert not manifests.of_kind("Secret") and not manifests.of_kind("Ingress")
    assert not re.search(r"AKIA[0-9A-Z]{16}|aws_secret_access_key", text, re.I)
    for service in manifests.of_kind("Service"):
        assert service["spec"].get("type", "ClusterIP") == "ClusterIP", service["metadata"]["name"]
    account = manifests.get("ServiceAccount", "sm-locust")
    assert account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].startswith("arn:aws:iam::")
    for workload in manifests.workloads():
        spec = pod_spec(workload)
        assert spec["serviceAccountName"] == "sm-locust" and spec["automountServiceAccountToken"] is False
        for container in spec["containers"]:
            names = {e["name"] for e in container.get("env", [])}
            names |= set().union(*[manifests.configmap(s["configMapRef"]["name"])
                                   for s in container.get("envFrom", [])])
            assert not names & CREDENTIAL_NAMES, (workload["metadata"]["name"], names & CREDENTIAL_NAMES)
            assert "hostPort" not in json.dumps(container)
        assert not spec.get("hostNetwork") and not any("hostPath" in v for v in spec.get("volumes", []))


@pytest.mark.e2e
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_containers_are_locked_down_and_sized(rendered, overlay):
    dockerfile = (ROOT / "Dockerfile").read_text()
    image_uid = int(re.search(r"useradd .*--uid (\d+)", dockerfile).group(1))
    for workload in rendered[overlay].workloads():
        spec = pod_spec(workload)
        pod_security = spec["securityContext"]
        assert pod_security["runAsNonRoot"] is True and pod_security["runAsUser"] == image_uid != 0
        assert pod_security["seccompProfile"]["type"] == "RuntimeDefault"
        for container in spec["containers"]:
            where = f"{overlay}: {workload['kind']}/{workload['metadata']['name']}/{container['name']}"
            security = container["securityContext"]
            assert security["readOnlyRootFilesystem"] is True, where
            assert security["allowPrivilegeEscalation"] is False and security["capabilities"]["drop"] == ["ALL"], where
            for kind in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(container["resources"][kind]), where
            resources = container["resources"]
            assert cores(resources["requests"]["cpu"]) <= cores(resources["limits"]["cpu"]), where
            assert container["image"].split(":")[0].endswith("sm-locust") and ":" in container["image"], where
            # a read-only root: /tmp and every path the program writes are emptyDir volumes
            volumes = mounts(workload, container)
            assert "emptyDir" in volumes["/tmp"], where
            args = container.get("args", [])
            written = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("--sm-out", "--csv", "--html", "--out")]
            if container["command"] == ["sm-locust"] and args[0] == "run" and "--out" not in args:
                # `sm-locust run` writes reports/<run-id>/ in its WORKDIR
                written.append(image_layout()[0] + "/reports")
            for path in written:
                assert any(under(path, m) and "emptyDir" in v for m, v in volumes.items()), (where, path)
            for mount in container.get("volumeMounts", []):
                if "configMap" in volumes[mount["mountPath"]]:
                    assert mount.get("readOnly") is True, (where, mount)


@pytest.mark.e2e
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_workers_find_the_master_and_run_one_process_per_cpu(rendered, overlay):
    manifests = rendered[overlay]
    service = manifests.get("Service", "sm-locust-master")
    assert {p["port"] for p in service["spec"]["ports"]} == {5557, 8089}
    master = manifests.master()
    labels = master["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()  # the Service reaches the master pod
    worker = manifests.worker()
    assert not service["spec"]["selector"].items() <= worker["spec"]["template"]["metadata"]["labels"].items()
    container = only_container(worker)
    env = container_env(manifests, container)
    command = argv(container, env)
    assert command[:1] == ["locust"] and "--worker" in command
    assert command[command.index("--master-host") + 1] == service["metadata"]["name"]
    assert command[command.index("--master-port") + 1] == "5557"
    cpus = math.ceil(cores(container["resources"]["requests"]["cpu"]))
    assert command[command.index("--processes") + 1] == str(cpus)
    # the payload the options name is mounted on the master and on every worker
    payload = env["SM_LOCUST_PAYLOAD"]
    for workload in (master, worker):
        volumes = mounts(workload, only_container(workload))
        source = [v for m, v in volumes.items() if under(payload, m) and "configMap" in v]
        assert source and Path(payload).name in manifests.configmap(source[0]["configMap"]["name"])
    if master["kind"] == "Job":  # headless: the master waits for every worker process
        master_env = container_env(manifests, only_container(master))
        assert int(master_env["LOCUST_EXPECT_WORKERS"]) == worker["spec"]["replicas"] * cpus


@pytest.mark.e2e
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_master_pod_is_scraped_where_it_serves_metrics(rendered, overlay):
    """Scrape annotations (docs/live-metrics.md) name the port and path the master's --publish prometheus serves."""
    manifests = rendered[overlay]
    master = manifests.master()
    annotations = master["spec"]["template"]["metadata"]["annotations"]
    container = only_container(master)
    publish = container_env(manifests, container)["SM_LOCUST_PUBLISH"]
    kind, host, port = publish.split(",")[0].split(":")
    assert (kind, host) == ("prometheus", "0.0.0.0")  # inside the pod; the Service does not expose it
    assert annotations == {"prometheus.io/scrape": "true", "prometheus.io/port": port, "prometheus.io/path": "/metrics"}
    assert [p["containerPort"] for p in container["ports"] if p["name"] == "metrics"] == [int(port)]
    assert "SM_LOCUST_PUBLISH" not in {e["name"] for e in only_container(manifests.worker()).get("env", [])}


@pytest.mark.e2e
def test_the_headless_master_uploads_and_the_webui_is_port_forwarded(rendered):
    job = rendered["headless"].master()
    assert job["kind"] == "Job" and job["spec"]["backoffLimit"] == 0
    assert pod_spec(job)["restartPolicy"] == "Never"
    container = only_container(job)
    command = argv(container, container_env(rendered["headless"], container))
    assert command[:2] == ["sm-locust", "run"] and "--master" in command
    assert command[command.index("--upload") + 1].startswith("s3://")
    webui = rendered["webui"].master()
    assert webui["kind"] == "Deployment" and webui["spec"]["replicas"] == 1
    web = only_container(webui)
    assert web["readinessProbe"]["httpGet"]["port"] == "web"
    assert [p["containerPort"] for p in web["ports"] if p["name"] == "web"] == [8089]


@pytest.mark.e2e
def test_the_dockerfile_matches_the_manifests(rendered):
    dockerfile = (ROOT / "Dockerfile").read_text()
    base = re.search(r"^FROM\s+(\S+)", dockerfile, re.M).group(1)
    assert re.fullmatch(r"python:3\.\d+\.\d+-slim-\w+@sha256:[0-9a-f]{64}", base), base  # version tag and digest
    assert "USER locust" in dockerfile and not re.search(r"^(ENV|ARG)\s+AWS_", dockerfile, re.M)
    assert not re.search(r"^ENTRYPOINT", dockerfile, re.M)  # the manifests and compose name the program
    workdir, copies = image_layout()
    for overlay, manifests in rendered.items():
        for workload in manifests.workloads():
            container = only_container(workload)
            # installed by `pip install .`
            assert container["command"][0] in ("sm-locust", "locust"), container["command"]
            for arg in argv(container, container_env(manifests, container)):
                for path in arg.split(","):
                    if under(path, workdir) and not any(under(path, m) for m in mounts(workload, container)):
                        copied = [c for c in copies if under(path, c)]
                        assert copied, (overlay, path)
                        assert (copies[copied[0]] / Path(path).relative_to(copied[0])).exists(), (overlay, path)


# -- the rendered pods, run as local processes -------------------------------------------------------

class LocalCluster:
    """Pods of a rendering as processes on 127.0.0.1 (see the module docstring for what maps to what)."""

    def __init__(self, manifests: Manifests, tmp: Path, extra_env: dict[str, str] | None = None):
        self.manifests = manifests
        self.tmp = tmp
        self.extra_env = extra_env or {}
        self.ports = {str(p["port"]): free_port() for s in manifests.of_kind("Service") for p in s["spec"]["ports"]}
        for workload in manifests.workloads():  # container ports a process listens on (the master's /metrics)
            for port in only_container(workload).get("ports", []):
                self.ports.setdefault(str(port["containerPort"]), free_port())
        self.services = {s["metadata"]["name"] for s in manifests.of_kind("Service")}
        self.workdir, copies = image_layout()
        self.image = tmp / "image"
        self.image.mkdir()
        for container_path, source in copies.items():
            link = self.image / Path(container_path).relative_to(self.workdir)
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(source)
        self.processes: dict[str, subprocess.Popen] = {}
        self.volumes: dict[str, dict[str, Path]] = {}

    def _volumes(self, name: str, workload: dict, container: dict) -> dict[str, Path]:
        local = {}
        for mount_path, volume in mounts(workload, container).items():
            if under(mount_path, self.workdir):
                folder = self.image / Path(mount_path).relative_to(self.workdir)  # a mount inside the image's tree
            else:
                folder = self.tmp / "volumes" / name / volume["name"]
            folder.mkdir(parents=True, exist_ok=True)
            if "configMap" in volume:
                for key, value in self.manifests.configmap(volume["configMap"]["name"]).items():
                    (folder / key).write_text(value)
            else:
                assert "emptyDir" in volume, volume
            local[mount_path] = folder
        return local

    def _rewrite(self, text: str, volumes: dict[str, Path]) -> str:
        if text in self.services or text == "0.0.0.0":
            return "127.0.0.1"
        if text in self.ports:
            return str(self.ports[text])
        text = re.sub(r"\b0\.0\.0\.0:(\d+)\b", lambda m: f"127.0.0.1:{self.ports.get(m.group(1), m.group(1))}", text)
        parts = []
        for path in text.split(","):
            for mount_path in sorted(volumes, key=len, reverse=True):
                if under(path, mount_path):
                    path = str(volumes[mount_path]) + path[len(mount_path):]
                    break
            else:
                if under(path, self.workdir):
                    path = str(self.image) + path[len(self.workdir):]
            parts.append(path)
        return ",".join(parts)

    def start(self, name: str, workload: dict) -> subprocess.Popen:
        container = only_container(workload)
        env = container_env(self.manifests, container)
        volumes = self.volumes[name] = self._volumes(name, workload, container)
        command = [self._rewrite(a, volumes) for a in argv(container, env)]
        program = {"sm-locust": [sys.executable, "-m", "sm_locust"],
                   "locust": [sys.executable, "-m", "locust"]}[command[0]]
        process_env = dict(os.environ)  # the conftest sandbox's placeholder keys stand in for the pod's IAM role
        process_env.update({k: self._rewrite(v, volumes) for k, v in env.items()})
        process_env.update(self.extra_env)
        process_env["PYTHONPATH"] = str(Path(sm_locust.__file__).resolve().parents[1])  # the image's installed package
        process_env["PYTHONUNBUFFERED"] = "1"
        log = open(self.tmp / f"{name}.log", "wb")
        proc = subprocess.Popen(program + command[1:], env=process_env, cwd=self.image, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        self.processes[name] = proc
        return proc

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text(errors="replace")

    def stop_all(self) -> None:
        stop_processes(self.processes.values())


def render_test_overlay(tmp_path: Path, base: str, literals: list[str], patches: list[dict] | None = None) -> Manifests:
    """Render `base` under a kustomize overlay of the test's own, on a copy of deploy/kubernetes."""
    copy_dir = tmp_path / "kubernetes"
    shutil.copytree(DEPLOY, copy_dir)
    overlay = copy_dir / "overlays" / "local-test"
    overlay.mkdir()
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": [f"../{base}"],
        "configMapGenerator": [{"name": "sm-locust-options", "behavior": "merge", "literals": literals}],
        "patches": patches or [],
    }
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return Manifests(render(overlay))



@pytest.mark.e2e
def test_headless_overlay_as_processes_runs_uploads_and_conserves_counts(endpoint_factory, rendered, tmp_path):
    t0 = time.monotonic()
    endpoint = endpoint_factory(max_concurrency=8, service_time_ms=5)
    s3 = MotoServer(tmp_path / "moto.log")
    try:
        s3.client().create_bucket(Bucket=BUCKET)
        job_args = only_container(rendered["headless"].master())["args"]
        manifests = render_test_overlay(tmp_path, "headless", [
            f"SM_LOCUST_ENDPOINT_URL={endpoint.url}", f"SM_LOCUST_UPLOAD=s3://{BUCKET}/runs",
        ], patches=[
            {"target": {"kind": "Job", "name": "sm-locust-master"}, "patch": yaml.safe_dump([
                {"op": "replace", "path": f"/spec/template/spec/containers/0/args/{job_args.index('--run-time') + 1}",
                 "value": "3s"},
            ])},
            {"target": {"kind": "ConfigMap", "name": "sm-locust-master-options"}, "patch": yaml.safe_dump([
                {"op": "replace", "path": "/data/LOCUST_EXPECT_WORKERS_MAX_WAIT", "value": "30"},
            ])},
        ])
        worker = manifests.worker()
        cluster = LocalCluster(manifests, tmp_path, extra_env=s3.env())  # S3 = the moto server
        try:
            master = cluster.start("master", manifests.master())
            for i in range(worker["spec"]["replicas"]):
                cluster.start(f"worker{i + 1}", worker)
            wait_exit(master, 60)
            workers_exit = [wait_exit(cluster.processes[f"worker{i + 1}"], 15)
                            for i in range(worker["spec"]["replicas"])]
            served = endpoint.stats()
        finally:
            cluster.stop_all()
        assert master.returncode == 0, cluster.log("master")[-3000:]
        assert workers_exit == [0, 0], [cluster.log(f"worker{i + 1}")[-1500:] for i in range(2)]
        runs = list((cluster.volumes["master"]["/app/reports"]).iterdir())
        assert len(runs) == 1, runs  # the run folder is on the reports emptyDir
        run = runs[0]
        summary = json.loads((run / "summary.json").read_text())
        totals = summary["totals"]
        users = int(job_args[job_args.index("--users") + 1])
        assert totals["requests"] > 100 and totals["failures"] == 0
        # the master's merged totals == what the endpoint served, but for requests in flight at the stop
        assert 0 <= served["requests"] - totals["requests"] <= users, (served["requests"], totals["requests"])
        assert summary["workers"]["expected"] == 2 and summary["workers"]["connected"] == 2
        assert summary["workers"]["lost"] == []
        # the run folder left the "cluster": every file in S3 under runs/<run-id>/
        uploaded = s3.keys(BUCKET, f"runs/{run.name}/")
        local = {f"runs/{run.name}/{p.relative_to(run).as_posix()}": p.read_bytes() for p in run.rglob("*")
                 if p.is_file()}
        assert uploaded == local and f"runs/{run.name}/summary.json" in uploaded
        assert f"uploaded {len(local)} files" in cluster.log("master")
    finally:
        s3.stop()
    assert time.monotonic() - t0 < 60


@pytest.mark.e2e
def test_webui_overlay_as_processes_serves_the_ui_and_takes_a_worker(endpoint, tmp_path):
    manifests = render_test_overlay(tmp_path, "webui", [f"SM_LOCUST_ENDPOINT_URL={endpoint.url}"])
    cluster = LocalCluster(manifests, tmp_path)
    try:
        cluster.start("master", manifests.master())
        cluster.start("worker1", manifests.worker())
        probe = only_container(manifests.master())["readinessProbe"]["httpGet"]
        url = f"http://127.0.0.1:{cluster.ports['8089']}"
        deadline = time.monotonic() + 120
        workers = []
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url + probe["path"], timeout=2) as resp:
                    ready = resp.status == 200  # what the readinessProbe asks
                with urllib.request.urlopen(url + "/stats/requests", timeout=2) as resp:
                    workers = json.loads(resp.read()).get("workers", [])
                if ready and workers:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        assert len(workers) == 1, cluster.log("master")[-2000:] + cluster.log("worker1")[-2000:]
    finally:
        cluster.stop_all()
