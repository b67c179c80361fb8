"""The `local` deployer: the embedded endpoint (`sm-locust serve`), one per configuration.

Each configuration starts `LocalEndpoint` on 127.0.0.1 with a free port and the configuration's
settings (`sm-locust serve`'s, in snake_case), and stops it after the test. The knobs that change
capacity and latency on a small machine: `workers`, `threads`, `max_concurrency`,
`service_time_ms`, `latency_ms`/`jitter_ms`, and dynamic batching (`max_batch_size`,
`max_batch_delay_ms`, `batch_item_cost`; docs/endpoint.md). `environment.SAGEMAKER_MODEL_SERVER_WORKERS`
(or `..._GUNICORN_WORKERS`) sets `workers`, as the framework containers read it, so a grid written
for SageMaker runs locally too. `instance_type` and `price_per_hour` only price the configuration
("as if it ran on one ml.c5.xlarge").

While the endpoint runs, a thread samples its CPU (summed over cores, as CloudWatch reports an
endpoint's) and memory once a second into `endpoint_usage.csv` in the run folder, with the same
sampler the endpoint's CloudWatch publisher uses; the sweep reads the knee step's window from it.
"""

from __future__ import annotations

import csv
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from sm_locust.endpoint.faults import EndpointConfig
from sm_locust.endpoint.metrics import ProcessSampler
from sm_locust.endpoint.server import LocalEndpoint
from sm_locust.errors import RunError, UsageError
from sm_locust.sweep.deployers import Deployer, DeployError, Deployment, Progress

NOT_SETTINGS = ("host", "port", "endpoint_name", "variant_name", "cloudwatch_url", "metrics_interval_s",
                "metrics_endpoint_name", "extra")
PRICING_KEYS = ("instance_type", "price_per_hour")
WORKER_VARIABLES = ("environment.SAGEMAKER_MODEL_SERVER_WORKERS", "environment.SAGEMAKER_GUNICORN_WORKERS")
USAGE_FILE = "endpoint_usage.csv"
SAMPLE_EVERY_S = 1.0


def _types() -> dict[str, type]:
    types = {"int": int, "float": float, "str": str, "bool": bool}
    out = {}
    for f in fields(EndpointConfig):
        if f.name in NOT_SETTINGS:
            continue
        name = str(f.type).split("|")[0].strip()
        out[f.name] = types.get(name, str)
    return out


def endpoint_kwargs(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The EndpointConfig keyword arguments of a configuration's settings."""
    kwargs = {k: v for k, v in settings.items() if k not in PRICING_KEYS and k not in WORKER_VARIABLES}
    for variable in WORKER_VARIABLES:
        if variable in settings and "workers" not in kwargs:
            kwargs["workers"] = int(settings[variable])
    return kwargs


class UsageSampler:
    """CPU and memory of the endpoint's process tree, once a second, appended to a CSV."""

    def __init__(self, pid: int, path: Path, every_s: float = SAMPLE_EVERY_S):
        self.sampler = ProcessSampler(pid)
        self.path = path
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sm-locust-endpoint-usage", daemon=True)

    def start(self) -> UsageSampler:
        self._thread.start()
        return self

    def _run(self) -> None:
        with open(self.path, "w", newline="") as f:
            out = csv.writer(f)
            out.writerow(["t", "cpu_pct", "memory_pct"])
            while not self._stop.wait(self.every_s):
                try:
                    usage = self.sampler.sample()
                except Exception:  # the endpoint went away between two samples
                    return
                out.writerow([f"{time.time():.3f}", f"{usage.cpu_pct:.1f}" if usage.cpu_pct is not None else "",
                              f"{usage.memory_pct:.2f}" if usage.memory_pct is not None else ""])
                f.flush()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class LocalDeployer(Deployer):
    name = "local"
    expected_deploy_s = 2.0
    expected_delete_s = 1.0

    def known_keys(self) -> list[str]:
        return sorted(_types()) + list(PRICING_KEYS) + list(WORKER_VARIABLES)

    def check(self, settings: Mapping[str, Any], where: Callable[[str], str]) -> None:
        types = _types()
        valid = self.known_keys()
        for key, value in settings.items():
            self.check_key(key, where, valid)
            expected = types.get(key, int if key in WORKER_VARIABLES else None)
            if key == "price_per_hour":
                expected = float
            if expected in (int, float):
                whole = expected is int
                if isinstance(value, bool) or not isinstance(value, (int, float)) or (whole and not float(value).is_integer()):
                    kind = "a whole number" if whole else "a number"
                    raise UsageError(f"{where(key)}: expected {kind}, got {value!r}")
            elif expected is str and not isinstance(value, str):
                raise UsageError(f"{where(key)}: expected text, got {value!r}")
        try:
            self.config(settings).validate()
        except ValueError as exc:
            raise UsageError(f"{where('')}: {exc}") from None

    @staticmethod
    def config(settings: Mapping[str, Any]) -> EndpointConfig:
        kwargs = endpoint_kwargs(settings)
        for key, value in kwargs.items():
            if key in ("workers", "threads", "max_concurrency", "max_batch_size", "stream_tokens", "seed") and value is not None:
                kwargs[key] = int(value)
        return EndpointConfig(port=0, **kwargs)

    def describe(self, settings: Mapping[str, Any]) -> str:
        command = LocalEndpoint(self.config(settings)).command()
        flags = command[command.index("--port") + 2:]  # after python -m sm_locust serve --host H --port P
        return "sm-locust serve " + " ".join(flags)

    def prepare(self, deployment: Deployment, sweep_id: str) -> None:
        deployment.endpoint_name = f"{sweep_id}-{deployment.index}"
        deployment.resources = {"local endpoint": deployment.endpoint_name}

    def deploy(self, deployment: Deployment, cancel: threading.Event, progress: Progress) -> None:
        run_dir = Path(deployment.run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        deployment.created_at = time.time()
        endpoint = LocalEndpoint(self.config(deployment.settings), log_path=run_dir / "endpoint.log")
        deployment.handle = {"endpoint": endpoint}
        try:
            endpoint.start()
        except RunError as exc:
            raise DeployError(str(exc)) from None
        deployment.endpoint_url = endpoint.url
        deployment.info = {"url": endpoint.url, "command": self.describe(deployment.settings)}
        deployment.handle["sampler"] = UsageSampler(endpoint.process.pid, run_dir / USAGE_FILE).start()

    def teardown(self, deployment: Deployment, progress: Progress) -> list[str]:
        handle = deployment.handle or {}
        if handle.get("sampler") is not None:
            handle["sampler"].stop()
        left = []
        if handle.get("endpoint") is not None:
            endpoint = handle["endpoint"]
            endpoint.stop()
            if endpoint.process is not None and endpoint.process.poll() is None:
                left.append(f"local endpoint pid {endpoint.process.pid} did not stop")
        deployment.deleted_at = time.time()
        return left
