"""Signals sent to the sm-locust process alone (`kill -INT PID`, `kill -TERM PID`, what a container
runtime does to PID 1): the Locust child stops, summary.json is written, the command exits 130 /
143, and no process it started is left (Locust, the local endpoint's gunicorn workers)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import psutil
import pytest

from tests.conftest import SAMPLE_PAYLOAD
from tests.fakes import wait_exit

OUTPUTS: dict[int, tuple] = {}  # a started command's pid -> its (stdout, stderr) files


def start(*args: str, cwd=None) -> subprocess.Popen:
    """The command with its output going to files, not pipes: a pipe nobody reads while the command
    runs fills (64 KiB on Linux) and the command then blocks in a write, so it never exits."""
    out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    proc = subprocess.Popen([sys.executable, "-m", "sm_locust", *args], stdout=out, stderr=err,
                            text=True, cwd=cwd, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    OUTPUTS[proc.pid] = (out, err)
    return proc


def output(proc: subprocess.Popen) -> tuple[str, str]:
    """What an exited command wrote: (stdout, stderr)."""
    texts = []
    for f in OUTPUTS.pop(proc.pid):
        f.seek(0)
        texts.append(f.read())
        f.close()
    return texts[0], texts[1]


def wait_for(condition, proc: subprocess.Popen, timeout: float = 120.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            out, err = output(proc)
            raise AssertionError(f"exited {proc.returncode} before {what}: {out[-1500:]} {err[-1500:]}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def descendants(proc: subprocess.Popen) -> list[psutil.Process]:
    try:
        return psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def command_line(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:  # gone meanwhile
        return ""


def locust_child(proc: subprocess.Popen) -> bool:
    return any("locust" in command_line(p) for p in descendants(proc))


def assert_all_gone(processes: list[psutil.Process], timeout: float = 10.0) -> None:
    _, alive = psutil.wait_procs(processes, timeout=timeout)
    assert not alive, [(p.pid, command_line(p)) for p in alive]


def stop_with(proc: subprocess.Popen, signum: int, timeout: float = 60.0) -> tuple[int, str, str, list[psutil.Process]]:
    """Send `signum` to the command alone; return (exit code, stdout, stderr, the processes it had started)."""
    children = descendants(proc)
    assert children, "nothing was started"
    proc.send_signal(signum)
    code = wait_exit(proc, timeout)
    out, err = output(proc)
    return code, out, err, children


@pytest.mark.e2e
@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_a_signal_to_run_stops_locust_writes_the_summary_and_exits_128_plus_n(endpoint, tmp_path, signum, code):
    out = tmp_path / "run"
    proc = start("run", "--endpoint-name", "ep", "--endpoint-url", endpoint.url, "--payload", str(SAMPLE_PAYLOAD),
                 "-u", "2", "-r", "20", "-t", "60s", "--out", str(out), "-q")
    wait_for(lambda: endpoint.stats()["requests"] >= 30, proc, what="traffic")
    exit_code, stdout, stderr, children = stop_with(proc, signum)
    assert exit_code == code, stdout + stderr
    assert_all_gone(children)
    served = endpoint.stats()["requests"]
    time.sleep(0.5)
    assert endpoint.stats()["requests"] == served  # nothing is sending any more
    summary = json.loads((out / "summary.json").read_text())
    assert summary["totals"]["requests"] >= 30
    assert f"interrupted by {signal.Signals(signum).name}" in stderr and "Traceback" not in stderr + stdout
    # its figures stand, its answer was not reached: never an `ok` a gate or a sweep would take
    assert summary["verdict"] == {"status": "inconclusive", "reason": f"interrupted by {signal.Signals(signum).name} "
                                  "before the run's end: its answer is not decided"}


@pytest.mark.e2e
def test_sigterm_to_smoke_stops_the_run_before_any_gate(endpoint, tmp_path):
    out = tmp_path / "smoke"
    proc = start("smoke", "--endpoint-name", "ep", "--endpoint-url", endpoint.url, "--payload", str(SAMPLE_PAYLOAD),
                 "-u", "2", "-t", "60s", "--out", str(out), "--max-p95-ms", "1000")
    wait_for(lambda: endpoint.stats()["requests"] >= 30, proc, what="traffic")
    exit_code, stdout, stderr, children = stop_with(proc, signal.SIGTERM)
    assert exit_code == 143, stdout + stderr
    assert_all_gone(children)
    assert (out / "summary.json").is_file()
    assert "PASS" not in stdout and "FAIL" not in stdout


@pytest.mark.e2e
def test_sigterm_to_demo_stops_locust_and_the_local_endpoint(tmp_path):
    out = tmp_path / "demo"
    proc = start("demo", "--out", str(out), "--no-cloudwatch", "--step-seconds", "20", "--max-users", "3")
    # summary.json is first written at Locust's test_start: the run is under way. (Locust opens its
    # history CSV before that; a SIGTERM in between stops a run that never started, with nothing to sum.)
    wait_for(lambda: locust_child(proc) and (out / "summary.json").is_file(), proc, timeout=120,
             what="the demo's Locust run")
    exit_code, stdout, stderr, children = stop_with(proc, signal.SIGTERM)
    assert exit_code == 143, stdout + stderr
    assert len(children) >= 2  # the local endpoint and Locust
    assert_all_gone(children)
    assert (out / "summary.json").is_file()


@pytest.mark.e2e
def test_sigterm_to_serve_stops_its_workers(tmp_path):
    from sm_locust.util.ports import free_port

    proc = start("serve", "--port", str(free_port()), "--workers", "2")
    wait_for(lambda: len(descendants(proc)) >= 2, proc, what="two workers")
    exit_code, stdout, stderr, children = stop_with(proc, signal.SIGTERM)
    assert exit_code == 143, stdout + stderr
    assert_all_gone(children)
    assert "Traceback" not in stdout + stderr


@pytest.mark.e2e
def test_sighup_to_serve_stops_it_instead_of_reloading(tmp_path):
    """Was: gunicorn reloaded on SIGHUP (new workers, the emulation's state reset) and kept serving."""
    from sm_locust.util.ports import free_port

    proc = start("serve", "--port", str(free_port()), "--workers", "2")
    wait_for(lambda: len(descendants(proc)) >= 2, proc, what="two workers")
    exit_code, stdout, stderr, children = stop_with(proc, signal.SIGHUP)
    assert exit_code == 128 + signal.SIGHUP, stdout + stderr
    assert "stopped on SIGHUP" in stderr
    assert_all_gone(children)
    assert "Traceback" not in stdout + stderr


@pytest.mark.e2e
@pytest.mark.parametrize("extra", [(), ("--serverless-memory-mb", "2048")], ids=["realtime", "serverless"])
def test_ctrl_c_on_serve_stops_it_without_a_traceback(tmp_path, extra):
    """A terminal's Ctrl+C reaches the whole process group (gunicorn's master and its gevent worker):
    the worker raised SystemExit in a greenlet, which gevent printed as a traceback."""
    from sm_locust.util.ports import free_port

    out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    proc = subprocess.Popen([sys.executable, "-m", "sm_locust", "serve", "--port", str(free_port()), *extra],
                            stdout=out, stderr=err, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"),
                            start_new_session=True)
    OUTPUTS[proc.pid] = (out, err)
    wait_for(lambda: len(descendants(proc)) >= 1, proc, what="its worker")
    time.sleep(1.0)  # the worker's loop running
    children = descendants(proc)
    os.killpg(proc.pid, signal.SIGINT)
    exit_code = wait_exit(proc, 30)
    stdout, stderr = output(proc)
    assert exit_code == 130, stdout + stderr
    assert_all_gone(children)
    assert "Traceback" not in stdout + stderr and "stopped on SIGINT" in stderr
