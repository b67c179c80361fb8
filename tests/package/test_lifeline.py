"""sm_locust.util.lifeline: the rule (a child whose parent is gone stops), the command it wraps, and a
real child that finds its parent gone and stops on its own (a Python child, no Locust, ~1 s)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from sm_locust.util import lifeline


def test_the_parent_is_gone_when_the_child_was_re_parented():
    assert not lifeline.parent_gone(4242, 4242)
    assert lifeline.parent_gone(4242, 1)  # re-parented to init
    assert lifeline.parent_gone(4242, 77)  # or to a subreaper


def test_wrap_runs_the_same_module_under_the_lifeline():
    wrapped = lifeline.wrap(["/py", "-m", "locust", "-f", "x.py"])
    assert wrapped == ["/py", "-m", "sm_locust.util.lifeline", "locust", "-f", "x.py"]
    with pytest.raises(ValueError):
        lifeline.wrap(["/py", "script.py"])


def test_the_watcher_calls_back_once_when_the_parent_changes():
    parents = iter([10, 10, 10, 1, 1])
    called = []
    lifeline.watch_parent(10, lambda: called.append(time.monotonic()), poll_s=0.01, getppid=lambda: next(parents))
    deadline = time.monotonic() + 60  # a wait, not a bound: it ends at the call
    while not called and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    assert len(called) == 1


@pytest.mark.e2e
def test_a_child_started_with_sigint_ignored_still_stops_on_sigint(tmp_path):
    """A background job of a non-interactive shell starts with SIGINT ignored; the lifeline restores it."""
    (tmp_path / "sleeper.py").write_text("import pathlib, time\npathlib.Path('ready').touch()\ntime.sleep(30)\n")
    script = f"{sys.executable} -m sm_locust.util.lifeline sleeper 2>err & echo $! >pid; wait $!; echo $? >rc"
    shell = subprocess.Popen(["bash", "-c", script], cwd=tmp_path, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "ready").exists():
            assert time.monotonic() < deadline and shell.poll() is None
            time.sleep(0.05)
        os.kill(int((tmp_path / "pid").read_text()), signal.SIGINT)
        shell.wait(10)
        assert (tmp_path / "rc").read_text().strip() == "130"  # died of SIGINT, as on Ctrl+C
        assert "KeyboardInterrupt" in (tmp_path / "err").read_text()
    finally:
        if shell.poll() is None:
            os.killpg(shell.pid, signal.SIGKILL)


@pytest.mark.e2e
def test_a_child_whose_parent_is_killed_stops_and_writes_to_its_log(tmp_path):
    """The parent (a shell) starts the child with the lifeline's environment, then is SIGKILLed."""
    log = tmp_path / "child.log"
    (tmp_path / "sleeper.py").write_text("import pathlib, time\ntry:\n    pathlib.Path('ready').touch()\n"
                                         "    time.sleep(60)\nexcept KeyboardInterrupt:\n"
                                         "    print('stopped as on Ctrl+C', flush=True)\n    raise SystemExit(130)\n")
    script = (f"{lifeline.PARENT_ENV}=$$ {lifeline.LOG_ENV}={log} {sys.executable} -m sm_locust.util.lifeline "
              "sleeper & wait")
    shell = subprocess.Popen(["bash", "-c", script], cwd=tmp_path, start_new_session=True)
    deadline = time.monotonic() + 60  # a wait for an event, generous on a busy machine: not a bound on speed
    while not psutil.Process(shell.pid).children():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    child = psutil.Process(shell.pid).children()[0]
    while not (tmp_path / "ready").exists():  # the lifeline watches before it runs the module
        assert time.monotonic() < deadline and child.is_running()
        time.sleep(0.05)
    os.kill(shell.pid, signal.SIGKILL)
    shell.wait(30)
    child.wait(60)
    text = log.read_text()
    assert "is gone; stopping" in text and "stopped as on Ctrl+C" in text
