"""docker-compose.yml's services as local processes: the compose topology without a Docker engine.

Reads docker-compose.yml, interpolates it as Compose does (`${VAR:-default}`, `${VAR-default}`),
rewrites service hostnames to 127.0.0.1, container ports to free local ports and volume paths to
temporary folders, and starts the services' own commands. Used by the compose and worker tests.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from sm_locust.util.ports import free_port
from tests.fakes import stop_processes

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
SCHEMA_FILE = ROOT / "tests" / "data" / "compose" / "compose-spec.json"
BIN = Path(sys.executable).parent
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}")


def interpolate(value, env: dict[str, str]):
    """Compose variable substitution for ${VAR}, ${VAR:-default} (unset or empty), ${VAR-default} (unset)."""
    if isinstance(value, str):
        def sub(match):
            name, op, default = match.group(1), match.group(2), match.group(3) or ""
            if op == ":-":
                return env.get(name) or default
            if op == "-":
                return env[name] if name in env else default
            return env.get(name, "")
        return _VAR.sub(sub, value)
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    return value


def load_compose(env: dict[str, str]) -> dict:
    return interpolate(yaml.safe_load(COMPOSE_FILE.read_text()), env)


@dataclass
class LocalTopology:
    """The compose services as local processes: hosts -> 127.0.0.1, ports -> free ones, volumes -> folders."""

    compose: dict
    volumes: dict[str, Path]
    log_dir: Path
    ports: dict[str, int] = field(default_factory=dict)
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    def __post_init__(self):
        for service in self.compose["services"].values():
            for port in service.get("expose", []) + [p.rsplit(":", 1)[-1] for p in service.get("ports", [])]:
                self.ports.setdefault(str(port), free_port())
        for arg in self.compose["services"]["master"]["command"]:
            if arg == "5557":
                self.ports.setdefault("5557", free_port())

    def rewrite(self, text: str) -> str:
        services = "|".join(map(re.escape, self.compose["services"]))
        text = re.sub(rf"\b(?:{services}|0\.0\.0\.0):(\d+)\b",
                      lambda m: f"127.0.0.1:{self.ports.get(m.group(1), m.group(1))}", text)
        if text in self.compose["services"] or text == "0.0.0.0":
            return "127.0.0.1"
        if text in self.ports:
            return str(self.ports[text])
        for container_path, local in self.volumes.items():
            if text == container_path or text.startswith(container_path + "/"):
                return str(local) + text[len(container_path):]
        return text

    def argv(self, service: str) -> list[str]:
        command = [self.rewrite(str(arg)) for arg in self.compose["services"][service]["command"]]
        program = {"locust": [sys.executable, "-m", "locust"], "sm-locust": [sys.executable, "-m", "sm_locust"],
                   "moto_server": [str(BIN / "moto_server")]}[command[0]]
        return program + command[1:]

    def environment(self, service: str) -> dict[str, str]:
        env = dict(os.environ)
        for key, value in (self.compose["services"][service].get("environment") or {}).items():
            if value is None:  # Compose: pass through from the shell when set there, else unset
                continue
            env[key] = self.rewrite(str(value))
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def start(self, service: str, instance: str | None = None) -> subprocess.Popen:
        name = instance or service
        log = open(self.log_dir / f"{name}.log", "wb")
        proc = subprocess.Popen(self.argv(service), env=self.environment(service), cwd=ROOT, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        self.processes[name] = proc
        return proc

    def wait_for_port(self, container_port: str, path: str | None = None, timeout: float = 20.0) -> None:
        port = self.ports[container_port]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if path:  # one long try, not 1-s tries queueing pages behind a starved server's first
                    wait = max(1.0, deadline - time.monotonic())
                    urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=wait).close()
                else:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise AssertionError(f"nothing answered on 127.0.0.1:{port} ({container_port}) within {timeout} s")

    def log(self, name: str) -> str:
        return (self.log_dir / f"{name}.log").read_text(errors="replace")

    def stop_all(self) -> None:
        stop_processes(self.processes.values())


def demo_topology(tmp_path: Path, **overrides: str) -> LocalTopology:
    """docker-compose.yml with the demo env file and the test's overrides, ready to start."""
    env = dict(os.environ)
    for line in (ROOT / "examples" / "distributed" / "demo.env").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition("=")
            env.setdefault(key, value)
    env.update({"LOCUST_HEADLESS": "true", "LOCUST_USERS": "4", "LOCUST_SPAWN_RATE": "20", "LOCUST_RUN_TIME": "3s",
                "LOCUST_EXPECT_WORKERS": "2", "LOCUST_EXPECT_WORKERS_MAX_WAIT": "30", "SM_LOCUST_RUN_ID": "run",
                "SM_LOCUST_DEMO_SERVICE_TIME_MS": "5", "SM_LOCUST_DEMO_CONCURRENCY": "8",
                "SM_LOCUST_LOCUSTFILES": "locustfiles/sagemaker.py,examples/distributed/web_login.py"})
    env.update(overrides)
    (tmp_path / "reports").mkdir()
    (tmp_path / "logs").mkdir()
    return LocalTopology(load_compose(env),
                         {"/reports": tmp_path / "reports", "/data": ROOT / "examples" / "distributed" / "data"},
                         tmp_path / "logs")


def start_cluster(topo: LocalTopology, workers: int = 2, endpoint: bool = True) -> None:
    if endpoint:
        topo.start("cloudwatch")
        topo.start("endpoint")
        topo.wait_for_port("8080", "/ping")
    topo.start("master")
    for i in range(workers):
        topo.start("worker", f"worker{i + 1}")


def endpoint_stats(topo: LocalTopology) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{topo.ports['8080']}/_sm_locust/stats", timeout=5) as resp:
        return json.loads(resp.read())


# -- the file itself ----------------------------------------------------------------------------
