"""Run a command as the child subreaper of everything it starts; when it ends, name what is left.

`python tests/docs/reaper.py LEFT.json GRACE_S COMMAND...`: runs COMMAND (a documented block under
bash), waits for it, then waits up to GRACE_S seconds for every process it started to end. A process
orphaned by the shell is re-parented to this one, not to init (prctl PR_SET_CHILD_SUBREAPER, Linux),
so one that left the shell's process group or session (`setsid`, a daemon's double fork) is still
found. The command lines of those still running go to LEFT.json; they are then killed. Exits with
COMMAND's code. Imports no gevent or locust: a plain process."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import time

import psutil

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def reap() -> None:
    """Collect every child that has ended (orphans re-parented here end as this process's zombies)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def running(me: psutil.Process) -> list[psutil.Process]:
    left = []
    for process in me.children(recursive=True):
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                left.append(process)
        except psutil.Error:
            continue
    return left


def main(argv: list[str]) -> int:
    out, grace_s, command = argv[0], float(argv[1]), argv[2:]
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")
    code = subprocess.Popen(command).wait()
    me = psutil.Process()
    deadline = time.monotonic() + grace_s
    while True:
        reap()
        left = running(me)
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    names = []
    for process in left:
        try:
            names.append(" ".join(process.cmdline())[:200])
            process.kill()
        except psutil.Error:
            continue
    with open(out, "w") as f:
        json.dump(names, f)
    end = time.monotonic() + 10
    while running(me) and time.monotonic() < end:
        reap()
        time.sleep(0.1)
    reap()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
