"""The Locust child: one headless Locust process into a run folder, and what it leaves there.

Locust runs in a child process (its own CLI, so `--processes`, master/worker and every Locust flag
behave as documented); the run folder gets Locust's CSVs with full history, `options.json` (what
was asked, no credentials) and `summary.json` (written by the recorder inside Locust), read back as
the typed record `record.model.Summary`. Signals: Locust runs in its own session, so a Ctrl+C or a
SIGTERM reaches it once, from here: the first SIGINT / SIGTERM is forwarded (as SIGINT: Locust stops,
writes its CSVs and summary.json, exits), a second one kills it; then `Interrupted` (exit 130 / 143).
Locust runs under `sm_locust.util.lifeline`: the forwarded SIGINT works even when a script started
this process with SIGINT ignored (`sm-locust run ... &`), and Locust stops by itself, writing its
results, when this process is killed outright (SIGKILL, an OOM kill). A run Locust rejects as a
usage error leaves no folder behind.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Self

from sm_locust.config.endpoint import SageMakerSettings
from sm_locust.config.options import Options, forwarded_arguments, parse_options
from sm_locust.core.folder import (
    LOCUST_OUTPUTS,
    LOCUST_REPORT,
    LOCUST_REPORT_PARTIAL,
    discard_out_dir,
    holds_run,
    make_out_dir,
    remove_run_files,
)
from sm_locust.errors import Interrupted, RunError, UsageError
from sm_locust.locustfiles import path as locustfile_path
from sm_locust.record.model import Summary
from sm_locust.record.summary import mark_interrupted, write_json
from sm_locust.sanitize import clean
from sm_locust.shapes import SHAPES
from sm_locust.util import lifeline
from sm_locust.util.outputs import locked_folder, open_output, promote, refuse_links_in
from sm_locust.util.ports import free_port


@dataclass(frozen=True)
class LoadSettings:
    """Locust's own load options for a headless run (`core.plan.locust_load` applies the rules)."""

    users: int | None = None
    spawn_rate: float | None = None
    run_time: str | None = None
    shape: str | None = None
    processes: int | None = None
    quiet: bool = False
    progress_every_s: float = 0.0
    locust_args: tuple[str, ...] = ()
    locust_stats: bool = False  # Locust's periodic stats tables (off: the step and closing lines carry the figures)
    closing_verdict: bool = False  # the caller prints the verdict in its closing lines: the shape does not


MASTER_FLAGS = ("--master-bind-host", "--master-bind-port", "--master-host", "--master-port")


def local_master(args: list[str]) -> list[str]:
    """`--processes`' master on 127.0.0.1 at a free port, its workers told where: Locust's default binds
    every interface on 5557, so two runs on one machine (parallel CI jobs, a sweep beside a run) clashed
    ('Address already in use') and the master listened beyond the host. Nothing when the Locust
    arguments already place the master."""
    if any(arg.split("=", 1)[0] in MASTER_FLAGS for arg in args):
        return []
    port = str(free_port())
    return ["--master-bind-host", "127.0.0.1", "--master-bind-port", port, "--master-host", "127.0.0.1",
            "--master-port", port]


def locust_command(forwarded: list[str], load: LoadSettings, out: Path) -> list[str]:
    """The Locust command line; `forwarded` are sm-locust option flags (see options.forwarded_arguments)."""
    files = [locustfile_path("sagemaker")]
    if load.shape:
        files.append(locustfile_path(SHAPES.get(load.shape)))
    cmd = [sys.executable, "-m", "locust", "-f", ",".join(files), "--headless",
           "--csv", str(out / "locust"), "--csv-full-history", "--html", str(out / LOCUST_REPORT_PARTIAL),
           "--exit-code-on-error", "0", "--sm-out", str(out)]
    if load.users is not None:
        cmd += ["--users", str(load.users)]
    if load.spawn_rate is not None:
        cmd += ["--spawn-rate", str(load.spawn_rate)]
    if load.run_time:
        cmd += ["--run-time", load.run_time]
    if load.processes:
        cmd += ["--processes", str(load.processes)]
    if load.processes or any(arg.split("=", 1)[0] == "--processes" for arg in load.locust_args):
        cmd += local_master(list(load.locust_args) + forwarded)
    if load.quiet or not load.locust_stats:  # no table every 2 s; Locust's final summary stays in locust.log
        cmd += ["--only-summary"]
    if load.closing_verdict:
        cmd += ["--sm-closing", "true"]
    if load.progress_every_s:
        cmd += ["--sm-progress", str(load.progress_every_s)]
    cmd += forwarded
    return cmd + list(load.locust_args)


def execute(settings: SageMakerSettings, load: LoadSettings, out: Path, extra_env: dict[str, str] | None = None,
            options: Options | None = None, overwrite: bool | None = None,
            echo: Callable[[str], None] | None = None) -> Summary:
    """Run Locust headless into `out`, locked while it runs (`locked_folder`); return summary.json, typed.

    `options` are the run's parsed options; the ones that differ from their defaults are forwarded
    to Locust (default: `settings`' own).
    `overwrite`: False refuses a folder that holds a run once it is locked (one may have ended there
    since the checks), True removes that run's files first, None leaves the folder as it is (a
    sweep resumes in its own). `echo` receives every line Locust prints (and this function's own),
    instead of the terminal getting them (quiet: only progress and errors); the Python API's
    progress display is one. Raises UsageError when Locust rejects its arguments (the folder is
    then removed if this call made it), RunError when Locust fails, Interrupted after a forwarded
    SIGINT / SIGTERM.
    """
    created = make_out_dir(out)
    with locked_folder(out):
        if overwrite is False and holds_run(out):
            raise UsageError(f"--out {out} already holds a run (summary.json, locust_*.csv); pass --overwrite to "
                             "replace it, or another folder")
        if overwrite:
            remove_run_files(out)
        return _execute_locked(settings, load, out, created, extra_env, options, echo)


def _execute_locked(settings: SageMakerSettings, load: LoadSettings, out: Path, created: bool,
                    extra_env: dict[str, str] | None, options: Options | None,
                    echo: Callable[[str], None] | None) -> Summary:
    options = parse_options(asdict(settings)) if options is None else options
    cmd = locust_command(forwarded_arguments(options), load, out)
    recorded = {"sm_locust": {k: v for k, v in asdict(settings).items() if v not in ("", None)},
                "options": dict(options), "load": asdict(load), "locust_command": cmd[1:]}
    # a link planted in the folder is refused before anything runs (Locust opens its files following links)
    refuse_links_in(out, (*LOCUST_OUTPUTS, "locust.log", "options.json", "summary.json", "timeline.jsonl"))
    write_json(out / "options.json", recorded)
    # an empty SM_LOCUST_* is "not set" here (add_cli_options); Locust's parser would read '' as the value
    env = {k: v for k, v in os.environ.items() if not (k.startswith("SM_LOCUST_") and not v.strip())}
    env.update(extra_env or {})
    env.update(lifeline.child_env(out / "locust.log"))  # Locust stops if this process is killed (SIGKILL, OOM)
    env.setdefault("PYTHONUNBUFFERED", "1")
    (echo or _print)(f"sm-locust: running Locust against {settings.endpoint_name!r}"
                     f"{' at ' + settings.endpoint_url if settings.endpoint_url else ''}; results go to {out}/")
    with open_output(out / "locust.log", "wb", buffering=0) as log:  # unbuffered: a SIGKILL loses no line
        # Own session: a terminal's Ctrl+C reaches Locust once, from here (SignalForwarder), not twice.
        # Only the main thread can forward; called from another thread Locust stays in our process
        # group, where a terminal's Ctrl+C still reaches it directly.
        # lifeline: SIGINT works in Locust even when this process was started with it ignored (`... &`).
        proc = subprocess.Popen(lifeline.wrap(cmd), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=SignalForwarder.can_forward())
        with SignalForwarder(proc) as forwarder:
            tail = _pump(proc, log, shown=echo_mode(load), echo=echo)
    promote(out / LOCUST_REPORT_PARTIAL, out / LOCUST_REPORT, _whole_html)  # a full disk leaves none, not half
    summary_path = out / "summary.json"
    if forwarder.received is not None:
        name = signal.Signals(forwarder.received).name
        if summary_path.exists():
            mark_interrupted(summary_path, name)  # its figures stand; its answer was not reached
            raise Interrupted(f"interrupted by {name}: Locust stopped; what it measured is in {out}/ (summary.json, "
                              "locust_stats.csv)", forwarder.received)
        raise Interrupted(f"interrupted by {name}: Locust stopped before writing summary.json; "
                          f"see {out / 'locust.log'}", forwarder.received)
    if proc.returncode == 2:  # Locust's own usage errors (bad option values, workers that never came)
        if _LOCUST_USAGE.search(tail):  # its parser refused an argument: nothing ran, nothing to keep
            discard_out_dir(out, created)
            hint = _hint(tail)
            if hint.startswith(OWN_ERROR):  # our own init check said it in one line: that line, once
                raise UsageError(hint[len(OWN_ERROR):])
            raise UsageError(f"Locust rejected the run: {hint}")
        raise UsageError(f"Locust rejected the run: {_hint(tail)}; full log in {out / 'locust.log'}")
    if proc.returncode != 0 or not summary_path.exists():
        raise RunError(f"Locust exited with code {proc.returncode} ({_hint(tail)}); full log in {out / 'locust.log'}")
    return Summary.of(json.loads(summary_path.read_text()))  # this run's own file, written by the recorder


class SignalForwarder:
    """While Locust runs: pass SIGINT / SIGTERM / SIGHUP on to it once, as SIGINT; a second signal
    kills its whole session (Locust and its --processes workers). `received` is the first signal's
    number, or None (the exit code is 128 + it).

    As SIGINT, because headless Locust handles that in every phase (stop, write the CSVs, fire
    `quitting`, so summary.json is written) while its SIGTERM handler is only installed after a shape
    run has ended: a SIGTERM during a step or plateau shape killed it with nothing written.

    In a container sm-locust is PID 1, and `kubectl delete` or a Job's deadline sends SIGTERM to it
    alone: without this Locust would be killed at the end of the grace period with nothing written
    (and nothing uploaded). Only the main thread may set handlers. Started from another thread
    (`sm_locust.run` in a thread), a watcher stops Locust as on SIGINT once the main thread has ended (a
    script interrupted by Ctrl+C: Python waits for the run's thread, which used to run to its end). A main
    thread that catches its KeyboardInterrupt and goes on (a notebook) cannot be told from one that was
    never interrupted: Python delivers signals to the main thread only, and only it may set handlers.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    WATCH_EVERY_S = 0.25

    def __init__(self, proc: subprocess.Popen, main_alive: Callable[[], bool] | None = None):
        self.proc = proc
        self.received: int | None = None
        self._previous: dict[int, Any] = {}
        self._main_alive = main_alive or (lambda: threading.main_thread().is_alive())
        self._done = threading.Event()

    @staticmethod
    def can_forward() -> bool:
        return threading.current_thread() is threading.main_thread()

    def __enter__(self) -> Self:
        if self.can_forward():
            for signum in self.SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        else:
            threading.Thread(target=self._watch_main, name="sm-locust-main-watch", daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        for signum, previous in self._previous.items():
            signal.signal(signum, signal.SIG_DFL if previous is None else previous)

    def _watch_main(self) -> None:
        while not self._done.wait(self.WATCH_EVERY_S):
            if self.proc.poll() is not None:
                return
            if not self._main_alive():  # the main thread ended (interrupted): stop Locust as on Ctrl+C
                self._handle(signal.SIGINT, None)
                return

    def _handle(self, signum: int, _frame) -> None:
        if self.proc.poll() is not None:
            return
        if self.received is None:
            self.received = signum
            self.proc.send_signal(signal.SIGINT)
            return
        try:  # asked twice: stop now
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# argparse's refusal ("locust: error: ...", "__main__.py: error: ..." under python -m), or our own
# init check's ("sm-locust: error: ..."): Locust quit before anything ran. Not the master's
# --expect-workers timeout (record/workers.py): that run started and its folder is kept (and uploaded).
_LOCUST_USAGE = re.compile(r"^(?:usage: |[\w.-]+: error: (?!only \d+ of \d+ workers connected))", re.MULTILINE)
OWN_ERROR = "sm-locust: error: "
_LOG_PREFIX = re.compile(r"^\[[^\]]*\] [^ ]*/[A-Z]+/[\w.]+: ")
_ERROR_WORDS = re.compile(r"error|invalid|unrecognized|must|cannot|not ", re.IGNORECASE)


def _hint(tail: str) -> str:
    """The line of Locust's output that says what went wrong: the last one with an error word,
    skipping stats-table rules and shutdown notices."""
    lines = [_LOG_PREFIX.sub("", line.strip()).replace("__main__.py: error:", "locust: error:")
             .removeprefix("sm-locust: error: ") for line in tail.splitlines()]
    useful = [line for line in lines if line and not set(line) <= set("-|=+ ") and "|" not in line
              and not line.startswith(("Shutting down", "Type ", "Response time percentiles", "Aggregated"))]
    for line in reversed(useful):
        if _ERROR_WORDS.search(line):
            return line
    return useful[-1] if useful else "no output"


def _whole_html(path: Path) -> bool:
    """Locust's report ends with </html> once it is written whole."""
    with open(path, "rb") as fh:
        fh.seek(max(0, path.stat().st_size - 256))
        return b"</html>" in fh.read().lower()


def _print(line: str) -> None:
    print(line, flush=True)


MAX_ECHOED = 4000  # characters of one line of Locust's output (a traceback line, a stats row)


ECHO_ALL, ECHO_DEFAULT, ECHO_QUIET = "all", "default", "quiet"
_LOCUST_LEVELS = {ECHO_DEFAULT: ("/WARNING/", "/ERROR/", "/CRITICAL/"), ECHO_QUIET: ("/ERROR/", "/CRITICAL/")}


def echo_mode(load: LoadSettings) -> str:
    """What of Locust's output reaches the terminal (all of it is in locust.log): every line when asked
    for (`--locust-stats`, or Locust's `--loglevel` / `-L` after `--`); by default sm-locust's own lines
    (steps, progress, verdict) and Locust's warnings and errors, no INFO line and no table; with -q
    only sm-locust's lines and errors."""
    args = load.locust_args
    if load.locust_stats or any(a in ("--loglevel", "-L") or a.startswith(("--loglevel=", "-L")) for a in args):
        return ECHO_ALL
    return ECHO_QUIET if load.quiet else ECHO_DEFAULT


def shows(line: str, shown: str) -> bool:
    """Whether a line of Locust's output is echoed in mode `shown` (echo_mode)."""
    if shown == ECHO_ALL or line.startswith("sm-locust"):
        return True
    return any(level in line for level in _LOCUST_LEVELS[shown])


def _pump(proc: subprocess.Popen, log, shown: str, echo: Callable[[str], None] | None = None) -> str:
    """Copy Locust's output to locust.log and echo it (`shown`: echo_mode; every line to `echo` when
    given); return the tail."""
    tail: list[str] = []
    assert proc.stdout is not None
    for raw in proc.stdout:
        line = clean(raw.decode(errors="replace").rstrip(), MAX_ECHOED)  # Locust quotes endpoint and user text
        log.write(line.encode() + b"\n")
        tail = (tail + [line])[-20:]
        if echo is not None:
            echo(line)
        elif shows(line, shown):
            _print(line)
    proc.wait()
    return "\n".join(tail)
