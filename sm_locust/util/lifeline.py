"""Child processes that stop when told, and when the sm-locust process that started them is gone.

A child started from a background job inherits SIGINT ignored, and SIGKILL runs no handler, so every
child (Locust, the local endpoint) runs as `python -m sm_locust.util.lifeline MODULE ARGS...`
(`wrap()`), which first restores SIGINT as KeyboardInterrupt and SIGTERM / SIGHUP to their default,
then, with `SM_LOCUST_PARENT_PID` set (`child_env()`), watches its parent: once re-parented it sends
itself SIGINT (output to `SM_LOCUST_CHILD_LOG` if given) and, `GRACE_S` later, SIGKILL to its
process group. `parent_gone` is the decision, pure.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import runpy
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

PARENT_ENV = "SM_LOCUST_PARENT_PID"
LOG_ENV = "SM_LOCUST_CHILD_LOG"
POLL_S = 0.5
GRACE_S = 20.0


def wrap(command: Sequence[str]) -> list[str]:
    """`[python, "-m", MODULE, *args]` -> `[python, "-m", "sm_locust.util.lifeline", MODULE, *args]`."""
    if len(command) < 3 or command[1] != "-m":
        raise ValueError(f"not a `python -m MODULE` command: {list(command)[:3]}")
    return [command[0], "-m", __name__, *command[2:]]


def child_env(log_path: str | Path | None = None, pid: int | None = None) -> dict[str, str]:
    """Environment entries that make a wrapped child watch this process (and, once it is gone, write
    its output to `log_path`)."""
    env = {PARENT_ENV: str(os.getpid() if pid is None else pid)}
    if log_path is not None:
        env[LOG_ENV] = str(Path(log_path).absolute())
    return env


def parent_gone(expected: int, current: int) -> bool:
    """True when the process that started this one (`expected`) is no longer its parent (`current`,
    os.getppid()): it exited and the child was re-parented to init or a subreaper."""
    return expected != current


def restore_signals() -> None:
    """SIGINT raises KeyboardInterrupt and SIGTERM / SIGHUP end the process, even when the parent
    started this one with them ignored (a background job of a non-interactive shell, nohup)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) == signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)


def _original(module: str, name: str):
    """`module.name` as it was before gevent's monkey-patching (a real thread, a blocking sleep)."""
    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None and monkey.is_module_patched(module):
        return monkey.get_original(module, name)
    return getattr(importlib.import_module(module), name)


def watch_parent(expected: int, on_gone: Callable[[], None], *, poll_s: float = POLL_S,
                 getppid: Callable[[], int] = os.getppid) -> None:
    """A background thread that calls `on_gone()` once, when `parent_gone(expected, getppid())`.

    A real OS thread with a blocking sleep (gevent's originals once it has patched them), started once
    the child's package is imported: a second thread alive while gevent patches the import machinery
    (Locust does, on import) deadlocks the import."""
    sleep = _original("time", "sleep")

    def watch() -> None:
        if hasattr(signal, "pthread_sigmask"):  # signals go to the main thread, where Python handles them
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
        while not parent_gone(expected, getppid()):
            sleep(poll_s)
        on_gone()

    _original("_thread", "start_new_thread")(watch, ())


def stop_self(log_path: str | None, grace_s: float = GRACE_S) -> None:
    """The parent is gone: keep the output, stop as on Ctrl+C, and make sure of it after `grace_s`."""
    try:
        if log_path:
            target = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        else:
            target = os.open(os.devnull, os.O_WRONLY)
        os.dup2(target, 1)
        os.dup2(target, 2)
        os.write(2, b"sm-locust: the sm-locust process that started this one is gone; stopping\n")
    except OSError:
        pass
    os.kill(os.getpid(), signal.SIGINT)
    _original("time", "sleep")(grace_s)
    try:
        group = os.getpgid(0)
        if group == os.getpid():  # its own process group (start_new_session): workers go with it
            os.killpg(group, signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
    except OSError:
        pass


def _import_package(module: str) -> None:
    """Import the package `python -m module` runs the __main__ of (importing a plain module would run it)."""
    spec = importlib.util.find_spec(module)
    package = module if spec is not None and spec.submodule_search_locations is not None else module.rpartition(".")[0]
    if package:
        importlib.import_module(package)


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    environ = os.environ if environ is None else environ
    if not args:
        sys.exit(f"usage: python -m {__name__} MODULE [ARGS...]")
    restore_signals()
    module = args[0]
    parent = environ.get(PARENT_ENV, "")
    if parent.isdigit():
        _import_package(module)  # Locust's gevent patching done before the watcher thread exists
        log_path = environ.get(LOG_ENV) or None
        watch_parent(int(parent), lambda: stop_self(log_path))
    sys.argv = [module, *args[1:]]  # run_module puts the module's file name first, as `python -m` does
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
