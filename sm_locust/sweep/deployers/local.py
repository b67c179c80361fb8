"""The `local` deployer: the embedded endpoint (`sm-locust serve`), one per configuration.

Each configuration starts `LocalEndpoint` on 127.0.0.1 on a free port with its settings
(`sm-locust serve`'s flags in snake_case; `environment.SAGEMAKER_MODEL_SERVER_WORKERS` sets `workers`
as the containers read it), and stops it after the test. `instance_type` and `price_per_hour` only
price it. A thread samples CPU, memory (and an MME's loaded models) once a second into
`endpoint_usage.csv`. Each endpoint runs under `util.lifeline` and carries the sweep id (`SWEEP_ENV`),
so `sm-locust sweep --cleanup ID` finds any left running (docs/sweep.md).
"""

from __future__ import annotations

import contextlib
import csv
import shlex
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

import psutil

from sm_locust.endpoint.components import parse_components
from sm_locust.endpoint.faults import EndpointConfig
from sm_locust.endpoint.metrics import ProcessSampler
from sm_locust.endpoint.multimodel import SERVE_OPTIONS, MultiModelConfig
from sm_locust.endpoint.server import LocalEndpoint
from sm_locust.errors import RunError, UsageError
from sm_locust.sweep.deployers import Deployer, DeployError, Deployment, Progress
from sm_locust.util.outputs import open_output

NOT_SETTINGS = ("host", "port", "endpoint_name", "variant_name", "cloudwatch_url", "metrics_interval_s",
                "metrics_endpoint_name", "extra", "multi_model", "inference_components")
# the multi-model emulation's settings: `sm-locust serve`'s flags (--instance-memory-mb -> instance_memory_mb, ...)
MULTI_MODEL = "multi_model"  # true: an MME with the defaults (any model setting below turns it on too)
MODEL_TYPES = {field: {"model_count": int, "model_size_mb": str, "cache_setting": str}.get(field, float)
               for field in SERVE_OPTIONS}
COMPONENTS = "inference_components"  # `a:2,b:1`, as serve's --inference-components
PRICING_KEYS = ("instance_type", "price_per_hour")
WORKER_VARIABLES = ("environment.SAGEMAKER_MODEL_SERVER_WORKERS", "environment.SAGEMAKER_GUNICORN_WORKERS")
INTEGER_KEYS = ("workers", "threads", "max_concurrency", "max_batch_size", "stream_tokens", "seed")
USAGE_FILE = "endpoint_usage.csv"
LOADED_MODELS = "loaded_models"  # endpoint_usage.csv's column for a multi-model endpoint
SAMPLE_EVERY_S = 1.0


def _types() -> dict[str, type]:
    types = {"int": int, "float": float, "str": str, "bool": bool}
    out = {}
    for f in fields(EndpointConfig):
        if f.name in NOT_SETTINGS:
            continue
        name = str(f.type).split("|")[0].strip()
        out[f.name] = types.get(name, str)
    out[MULTI_MODEL] = bool
    out[COMPONENTS] = str
    for field, dest in SERVE_OPTIONS.items():
        out[dest] = MODEL_TYPES[field]
    return out


def multi_model_config(settings: Mapping[str, Any]) -> MultiModelConfig | None:
    """The MME emulation a configuration asks for (`multi_model: true` or any model setting), else None."""
    given = {field: settings[dest] for field, dest in SERVE_OPTIONS.items() if settings.get(dest) is not None}
    if not given and not settings.get(MULTI_MODEL):
        return None
    if "model_count" in given:
        given["model_count"] = int(given["model_count"])
    if "model_size_mb" in given:
        size = given["model_size_mb"]
        given["model_size_mb"] = f"{size:g}" if isinstance(size, (int, float)) else str(size)
    if "cache_setting" in given:
        given["cache_setting"] = str(given["cache_setting"]).capitalize()
    return MultiModelConfig(**given)


def endpoint_kwargs(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The EndpointConfig keyword arguments of a configuration's settings."""
    emulation = {MULTI_MODEL, COMPONENTS, *SERVE_OPTIONS.values()}
    kwargs = {k: v for k, v in settings.items()
              if k not in PRICING_KEYS and k not in WORKER_VARIABLES and k not in emulation}
    for variable in WORKER_VARIABLES:
        if variable in settings and "workers" not in kwargs:
            kwargs["workers"] = int(settings[variable])
    kwargs["multi_model"] = multi_model_config(settings)
    if settings.get(COMPONENTS):
        kwargs["inference_components"] = parse_components(str(settings[COMPONENTS]))
    return kwargs


class UsageSampler:
    """CPU and memory of the endpoint's process tree, once a second, appended to a CSV; with
    `loaded_models` (a multi-model endpoint's count of models in memory) a third column of it."""

    def __init__(self, pid: int, path: Path, every_s: float = SAMPLE_EVERY_S,
                 loaded_models: Callable[[], int | None] | None = None):
        self.sampler = ProcessSampler(pid)
        self.path = path
        self.every_s = every_s
        self.loaded_models = loaded_models
        self.failed: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sm-locust-endpoint-usage", daemon=True)

    def start(self) -> UsageSampler:
        self._thread.start()
        return self

    def _run(self) -> None:
        """Samples until stopped; a write that fails (a full disk mid-sweep) ends the sampling quietly, noted
        in `failed` (it printed a thread's traceback; the sweep then reports the full disk itself)."""
        try:
            self._sample()
        except OSError as exc:
            self.failed = exc.strerror or str(exc)

    def _sample(self) -> None:
        with open_output(self.path, "w", newline="") as f:
            out = csv.writer(f)
            out.writerow(["t", "cpu_pct", "memory_pct", *([LOADED_MODELS] if self.loaded_models else [])])
            while not self._stop.wait(self.every_s):
                try:
                    usage = self.sampler.sample()
                    models = [self.loaded_models()] if self.loaded_models else []
                except Exception:  # the endpoint went away between two samples
                    return
                out.writerow([f"{time.time():.3f}", f"{usage.cpu_pct:.1f}" if usage.cpu_pct is not None else "",
                              f"{usage.memory_pct:.2f}" if usage.memory_pct is not None else "",
                              *("" if m is None else m for m in models)])
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
                numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
                if not numeric or (whole and not float(value).is_integer()):
                    kind = "a whole number" if whole else "a number"
                    raise UsageError(f"{where(key)}: expected {kind}, got {value!r}")
            elif expected is bool and not isinstance(value, bool):
                raise UsageError(f"{where(key)}: expected true or false, got {value!r}")
            elif key == SERVE_OPTIONS["model_size_mb"] and not isinstance(value, str):
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise UsageError(f"{where(key)}: expected a size in MB (a number, or LO-HI), got {value!r}")
            elif expected is str and not isinstance(value, str):
                raise UsageError(f"{where(key)}: expected text, got {value!r}")
        try:
            self.config(settings).validate()
        except ValueError as exc:
            raise UsageError(f"{where('')}: {exc}") from None

    @staticmethod
    def config(settings: Mapping[str, object]) -> EndpointConfig:
        kwargs = endpoint_kwargs(settings)
        for key, value in kwargs.items():
            if key in INTEGER_KEYS and value is not None:
                kwargs[key] = int(value)
        return EndpointConfig(port=0, **kwargs)

    def describe(self, settings: Mapping[str, object]) -> str:
        command = LocalEndpoint(self.config(settings)).command()
        flags = command[command.index("--port") + 2:]  # after python -m sm_locust serve --host H --port P
        return "sm-locust serve " + shlex.join(flags)  # quoted: --model-inputs holds `;`

    def prepare(self, deployment: Deployment, sweep_id: str) -> None:
        deployment.endpoint_name = f"{sweep_id}-{deployment.index}"
        deployment.resources = {"local endpoint": deployment.endpoint_name}
        deployment.info["sweep_id"] = sweep_id

    def deploy(self, deployment: Deployment, cancel: threading.Event, progress: Progress) -> None:
        run_dir = Path(deployment.run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        deployment.created_at = time.time()
        endpoint = LocalEndpoint(self.config(deployment.settings), log_path=run_dir / "endpoint.log",
                                 env={SWEEP_ENV: str(deployment.info.get("sweep_id") or ""),
                                      SWEEP_DIR_ENV: str(run_dir.resolve().parent)})
        deployment.handle = {"endpoint": endpoint}
        try:
            endpoint.start()
        except RunError as exc:
            raise DeployError(str(exc)) from None
        deployment.endpoint_url = endpoint.url
        deployment.info.update({"url": endpoint.url, "command": self.describe(deployment.settings)})
        if endpoint.process is None:
            raise DeployError("the local endpoint did not start a process")
        models = None
        if endpoint.config.multi_model is not None:
            def models() -> int | None:
                return (endpoint.stats().get("multi_model") or {}).get("loaded_models")
        deployment.handle["sampler"] = UsageSampler(endpoint.process.pid, run_dir / USAGE_FILE,
                                                    loaded_models=models).start()

    def cleanup(self, sweep_id: str, progress: Progress) -> tuple[list[str], list[str]]:
        """Stop this machine's endpoint processes tagged with the sweep id (a sweep's endpoints stop by
        themselves when the sweep is killed, `sm_locust.util.lifeline`; this finds any that did not)."""
        tagged = tagged_processes(sweep_id)
        pids = {p.pid for p in tagged}
        roots = [p for p in tagged if _parent_pid(p) not in pids]
        for process in roots:
            progress(f"stopping local endpoint pid {process.pid}")
            with contextlib.suppress(psutil.Error):
                process.send_signal(signal.SIGINT)  # gunicorn: a quick stop of its workers
        _, alive = psutil.wait_procs(tagged, timeout=10)
        for process in alive:
            with contextlib.suppress(psutil.Error):
                process.kill()
        _, alive = psutil.wait_procs(alive, timeout=5)
        left = {p.pid for p in alive}
        return ([f"local endpoint pid {p.pid}" for p in roots if p.pid not in left],
                [f"local endpoint pid {pid} did not stop" for pid in sorted(left)])

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


SWEEP_ENV = "SM_LOCUST_SWEEP_ID"  # in a local sweep's endpoint processes' environment: the sweep id
SWEEP_DIR_ENV = "SM_LOCUST_SWEEP_DIR"  # ... and its sweep folder, which the sweep holds locked while it runs


def tagged_folders(sweep_id: str) -> set[Path]:
    """The sweep folders this machine's endpoints of `sweep_id` say they belong to (`SWEEP_DIR_ENV`): where
    `--cleanup` looks for the lock of a sweep still running (its --out may not be the default folder)."""
    folders = set()
    for process in tagged_processes(sweep_id):
        try:
            folder = process.environ().get(SWEEP_DIR_ENV)
        except (psutil.Error, OSError):
            continue
        if folder:
            folders.add(Path(folder))
    return folders


def tagged_processes(sweep_id: str) -> list[psutil.Process]:
    """This user's processes whose environment carries `SWEEP_ENV=sweep_id` (endpoint masters and workers)."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(SWEEP_ENV) == sweep_id:
                found.append(process)
        except (psutil.Error, OSError):
            continue  # gone meanwhile, or another user's
    return found


def _parent_pid(process: psutil.Process) -> int | None:
    try:
        return process.ppid()
    except psutil.Error:
        return None

