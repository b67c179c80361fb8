"""Running the local endpoint as a child process managed by `LocalEndpoint`.

`serving.py` is the gunicorn side (`sm-locust serve`), kept apart so a managing process never imports
the application. The child runs gunicorn with gevent workers (gthread when --threads > 1), binds
127.0.0.1 unless told otherwise and exits 130 / 143 on SIGINT / SIGTERM; under `util.lifeline` it
stops when its parent is gone, even after a SIGKILL. Given no port, `LocalEndpoint` binds a free one
itself and hands the listening socket to the child (`LISTEN_FD_ENV`), so no other process can take
the port in between.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from sm_locust.endpoint.faults import EndpointConfig
from sm_locust.endpoint.options import SERVE_ENV_PREFIX
from sm_locust.errors import RunError
from sm_locust.util import lifeline
from sm_locust.util.arguments import require_kind
from sm_locust.util.outputs import open_output

_FIELD_TYPES = {f.name: str(f.type) for f in dataclasses.fields(EndpointConfig)}  # annotations, as text

READY_TIMEOUT_S = 15.0
LISTEN_FD_ENV = "SM_LOCUST_LISTEN_FD"  # `sm-locust serve` serves on this inherited listening socket


def check_port_free(host: str, port: int) -> None:
    """Raise a one-line RunError when host:port cannot be bound."""
    if port == 0:
        return
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise RunError(f"port {port} on {host} is already in use; choose another with --port") from None
            raise RunError(f"cannot listen on {host}:{port}: {exc.strerror}") from None


def listening_socket(host: str = "127.0.0.1") -> socket.socket:
    """A TCP socket bound to a free port on host and listening, inheritable by a child process."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn's own: a restart on it binds at once
        sock.bind((host, 0))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


class LocalEndpoint:
    """A local endpoint in a child process: `with LocalEndpoint(service_time_ms=10) as ep: ep.url`."""

    def __init__(self, config: EndpointConfig | None = None, *, log_path: str | Path | None = None,
                 env: Mapping[str, str] | None = None, **overrides):
        config = config or EndpointConfig(port=0)  # tests and demos: a free port, never 8080
        self.extra_env = dict(env or {})  # e.g. a local sweep's tag, by which `sweep --cleanup` finds it
        for key, value in overrides.items():
            if not hasattr(config, key):
                raise TypeError(f"unknown endpoint setting {key!r}")
            require_kind(key, value, _FIELD_TYPES.get(key, ""))
        self._listener: socket.socket | None = None  # the bound port, until the child has it (start)
        if not overrides.get("port", config.port):
            self._listener = listening_socket(overrides.get("host", config.host))
            overrides["port"] = self._listener.getsockname()[1]
        self.config = replace(config, **overrides)
        self.log_path = Path(log_path) if log_path else None
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{self.config.host}:{self.config.port}"

    def command(self) -> list[str]:
        c = self.config
        args = [sys.executable, "-m", "sm_locust", "serve", "--host", c.host, "--port", str(c.port),
                "--workers", str(c.workers), "--threads", str(c.threads)]
        flags = {
            "--max-concurrency": c.max_concurrency, "--service-time-ms": c.service_time_ms,
            "--latency-ms": c.latency_ms, "--jitter-ms": c.jitter_ms, "--throttle-ratio": c.throttle_ratio,
            "--model-error-ratio": c.model_error_ratio, "--error-ratio": c.error_ratio,
            "--drop-ratio": c.drop_ratio, "--cold-start-ms": c.cold_start_ms, "--not-ready-s": c.not_ready_s,
            "--first-token-ms": c.first_token_ms, "--token-ms": c.token_ms, "--stream-tokens": c.stream_tokens,
            "--stream-error-ratio": c.stream_error_ratio,
            "--max-batch-size": c.max_batch_size, "--max-batch-delay-ms": c.max_batch_delay_ms,
        }
        for flag, value in flags.items():
            if value:
                args += [flag, str(value)]
        if c.endpoint_name:
            args += ["--endpoint-name", c.endpoint_name]
        if c.variant_name != "AllTraffic":
            args += ["--variant-name", c.variant_name]
        if c.max_batch_size > 1 and c.batch_item_cost != EndpointConfig.batch_item_cost:
            args += ["--batch-item-cost", str(c.batch_item_cost)]
        if c.seed is not None:
            args += ["--seed", str(c.seed)]
        if c.cloudwatch_url:
            args += ["--cloudwatch-url", c.cloudwatch_url, "--metrics-interval", str(c.metrics_interval_s)]
        if c.metrics_endpoint_name:
            args += ["--metrics-endpoint-name", c.metrics_endpoint_name]
        if c.protocol != EndpointConfig.protocol:
            args += ["--protocol", c.protocol]
        for spec_flag, spec in (("--model-inputs", c.model_inputs), ("--model-outputs", c.model_outputs)):
            if spec:
                args += [spec_flag, spec]
        if c.llm is not None:
            args += c.llm.flags()
        if c.serverless is not None:
            args += c.serverless.flags()
        if c.multi_model is not None:
            args += c.multi_model.flags()
        if c.inference_components:
            args += ["--inference-components", ",".join(spec.flag() for spec in c.inference_components)]
        if c.fleet is not None:
            args += c.fleet.flags()
        if c.async_inference is not None:
            args += c.async_inference.flags()
        return args

    def start(self) -> LocalEndpoint:
        self.config.validate()
        listener, self._listener = self._listener, None
        if listener is None:  # a port chosen by the caller, or a restart: the child binds it
            check_port_free(self.config.host, self.config.port)
        out = open_output(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SAGEMAKER_MODEL_SERVER", "SAGEMAKER_GUNICORN", LISTEN_FD_ENV, SERVE_ENV_PREFIX))}
        env.update(lifeline.child_env())  # the endpoint stops when this process is gone, even after a SIGKILL
        env.update(self.extra_env)
        if listener is not None:
            env[LISTEN_FD_ENV] = str(listener.fileno())
        try:
            self.process = subprocess.Popen(lifeline.wrap(self.command()), stdout=out,
                                            stderr=subprocess.STDOUT if self.log_path else subprocess.DEVNULL,
                                            env=env, start_new_session=True,
                                            pass_fds=(listener.fileno(),) if listener is not None else ())
        finally:
            if listener is not None:  # the child holds it now; a stopped endpoint's port must refuse
                listener.close()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RunError(f"the local endpoint exited with code {self.process.returncode} before it was ready"
                               + (f"; see {self.log_path}" if self.log_path else ""))
            if self.ping():
                return self
            time.sleep(0.05)
        self.stop()
        raise RunError(f"the local endpoint did not answer /ping within {READY_TIMEOUT_S:.0f} s")

    def ping(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/ping", timeout=1) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def stats(self) -> dict:
        with urllib.request.urlopen(self.url + "/_sm_locust/stats", timeout=5) as resp:
            return json.loads(resp.read())

    def stop(self, timeout: float = 10.0) -> int | None:
        """Stop the endpoint; its exit code, 0 when it stopped cleanly on the SIGINT sent here (serve
        itself exits 130 then, as every command stopped by SIGINT)."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else None
        self.process.send_signal(signal.SIGINT)  # gunicorn: quick shutdown (SIGTERM waits for workers)
        try:
            code = self.process.wait(timeout)
            return 0 if code == 128 + signal.SIGINT else code
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            return self.process.wait()

    def __enter__(self) -> LocalEndpoint:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
