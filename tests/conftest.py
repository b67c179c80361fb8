"""Shared fixtures. Locust is imported first: it monkey-patches gevent, which must happen before
boto3/urllib3 are imported (docs/facts.md).

The tiers: a test that starts a process (a local endpoint, Locust, moto_server, a kernel, the tool
itself) or a server (anything that binds a socket) carries `@pytest.mark.e2e`, or its module
`pytestmark = pytest.mark.e2e`. Here a test without the marker fails if its setup or call does
either (Python's audit events `subprocess.Popen`, `os.fork`, `os.posix_spawn`, `os.system`,
`socket.bind`), so `pytest -m "not e2e"` stays the fast inner loop. A test that runs Locust users
in-process (`Environment.create_local_runner`) or moto in-process (`mock_aws`) is marked too: no event
tells those apart, so that is the author's to remember. `python tests/run.py` runs both tiers.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import locust  # noqa: F401  (import order matters: gevent patching before boto3)

import pytest

from sm_locust.endpoint.server import LocalEndpoint
from tests.fakes import MotoServer

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_PAYLOAD = ROOT / "sm_locust" / "data" / "ranking_10rows.json"

STARTS = frozenset({"subprocess.Popen", "os.fork", "os.forkpty", "os.posix_spawn", "os.system", "socket.bind"})
_started: list[str] | None = None  # while a test without the e2e marker runs: what it started


def _audit(event: str, args: tuple) -> None:
    if _started is not None and event in STARTS:
        _started.append(f"{event} {args[1]!r}" if event == "socket.bind" else event)


sys.addaudithook(_audit)  # process-wide and for good: it only looks while `_started` is a list


def _watch(item: pytest.Item) -> Iterator[None]:
    """Fail `item` if it is not marked e2e and this phase started a process or a server."""
    global _started
    if item.get_closest_marker("e2e") is not None:
        return (yield)
    _started = []
    try:
        result = yield
    finally:
        started, _started = _started, None
    if started:
        pytest.fail(f"{item.nodeid} starts a process or a server ({', '.join(sorted(set(started)))}): mark it "
                    "@pytest.mark.e2e (tests/conftest.py) or give it a fake", pytrace=False)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _watch(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _watch(item))


@pytest.fixture(autouse=True)
def _aws_sandbox(monkeypatch, tmp_path):
    """No real AWS config or credentials leak into tests; placeholders only."""
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "aws_config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "aws_credentials"))
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME",
                 "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def discard(ep: LocalEndpoint) -> None:
    """End an endpoint a test is done with: SIGKILL to its process group (gunicorn's master and workers),
    then reap it. Its clean stop (`LocalEndpoint.stop`: SIGINT, workers told to quit, ~0.5 s) proves
    nothing after the test; tests of that stop call it themselves. Its shared counters are anonymous
    memory: nothing outlives it."""
    if ep.process is not None and ep.process.poll() is None:
        os.killpg(ep.process.pid, signal.SIGKILL)
        ep.process.wait(10)


@pytest.fixture
def refused_url() -> Iterator[str]:
    """http://127.0.0.1:PORT where a connection is refused for the whole test: the port is bound here and
    never listened on (Linux answers a connect with RST), so no other process can serve on it meanwhile,
    as it could on a port looked up free and let go. A socket that never listens is no server: its bind is
    not one the tiers count."""
    global _started
    watching, _started = _started, None
    try:
        holder = socket.socket()
        holder.bind(("127.0.0.1", 0))
    finally:
        _started = watching
    with holder:
        yield f"http://127.0.0.1:{holder.getsockname()[1]}"


@pytest.fixture
def endpoint_factory(tmp_path):
    """Start local endpoints on 127.0.0.1 with free ports; all are ended after the test (`discard`)."""
    started: list[LocalEndpoint] = []

    def start(**settings) -> LocalEndpoint:
        ep = LocalEndpoint(log_path=tmp_path / f"endpoint{len(started)}.log", **settings)
        started.append(ep)
        return ep.start()

    yield start
    for ep in started:
        discard(ep)


@pytest.fixture
def endpoint(endpoint_factory) -> LocalEndpoint:
    return endpoint_factory()


@pytest.fixture(scope="module")
def module_endpoint(tmp_path_factory):
    """One default local endpoint for a whole test module (a start and a stop cost ~1.3 s, more on a
    busy box), for tests that only send to it and read its counters as differences: isolation is not
    what they test. A module opts in by defining `endpoint` as `module_endpoint`."""
    with LocalEndpoint(log_path=tmp_path_factory.mktemp("endpoint") / "endpoint.log") as ep:
        yield ep


@pytest.fixture(scope="module")
def runtime():
    """A local endpoint (4 slots, 10 ms) per test module: the SageMaker runtime of moto-backed tests
    (AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME points at it)."""
    with LocalEndpoint(max_concurrency=4, service_time_ms=10) as ep:
        yield ep


@pytest.fixture(scope="module")
def moto_url(tmp_path_factory):
    """One `moto_server` process per test module (tests.fakes.MotoServer), its URL; modules that use moto's
    in-process ThreadedMotoServer define their own `moto_url`."""
    server = MotoServer(tmp_path_factory.mktemp("moto") / "moto_server.log")
    yield server.url
    server.stop()


def run_cli(*args: str, timeout: float = 120, env: dict | None = None,
            cwd: str | Path | None = None) -> subprocess.CompletedProcess:
    """Run `python -m sm_locust ARGS` and capture its output."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "sm_locust", *args], capture_output=True, text=True, timeout=timeout,
                          env=full_env, cwd=cwd)


def assert_one_line_error(result, code: int, *needles: str) -> None:
    """A finished command failed with `code` and exactly one stderr line holding every needle, no traceback."""
    assert result.returncode == code, result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    for needle in needles:
        assert needle in lines[0], lines[0]
