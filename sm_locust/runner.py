"""Headless runs: turn sm-locust settings into a Locust process and a run folder.

`sm-locust run` and `sm-locust demo` both come here. Locust itself runs in a child process (its
own CLI, so `--processes`, master/worker and every Locust flag behave as documented); the run
folder gets Locust's CSVs with full history, `options.json` (what was asked, no credentials) and
`summary.json` (written by the recorder inside the Locust process).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sm_locust.errors import RunError, UsageError
from sm_locust.locustfiles import path as locustfile_path
from sm_locust.options import SageMakerSettings, forwarded_arguments
from sm_locust.record.summary import write_json

DEFAULT_REPORTS_DIR = "reports"


@dataclass
class LoadSettings:
    """Locust's own load options for a headless run."""

    users: int | None = None
    spawn_rate: float | None = None
    run_time: str | None = None
    shape: str | None = None
    processes: int | None = None
    quiet: bool = False
    progress_every_s: float = 0.0
    locust_args: list[str] = field(default_factory=list)


def run_id(endpoint_name: str, now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now or time.time()))
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", endpoint_name).strip("-") or "run"
    return f"{stamp}-{safe}"


def choose_out_dir(out: str | None, endpoint_name: str) -> Path:
    if out:
        return Path(out)
    base = Path(DEFAULT_REPORTS_DIR) / run_id(endpoint_name)
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def locust_command(forwarded: list[str], load: LoadSettings, out: Path) -> list[str]:
    """The Locust command line; `forwarded` are sm-locust option flags (see options.forwarded_arguments)."""
    files = [locustfile_path("sagemaker")]
    if load.shape:
        from sm_locust.shapes import SHAPES

        files.append(locustfile_path(SHAPES.get(load.shape)))
    cmd = [sys.executable, "-m", "locust", "-f", ",".join(files), "--headless",
           "--csv", str(out / "locust"), "--csv-full-history", "--html", str(out / "locust_report.html"),
           "--exit-code-on-error", "0", "--sm-out", str(out)]
    if load.users is not None:
        cmd += ["--users", str(load.users)]
    if load.spawn_rate is not None:
        cmd += ["--spawn-rate", str(load.spawn_rate)]
    if load.run_time:
        cmd += ["--run-time", load.run_time]
    if load.processes:
        cmd += ["--processes", str(load.processes)]
    if load.quiet:
        cmd += ["--only-summary"]
    if load.progress_every_s:
        cmd += ["--sm-progress", str(load.progress_every_s)]
    cmd += forwarded
    return cmd + list(load.locust_args)


def execute(settings: SageMakerSettings, load: LoadSettings, out: Path, extra_env: dict[str, str] | None = None,
            options: Any = None) -> dict:
    """Run Locust headless into `out`; return summary.json's content.

    `options` holds every sm-locust option by dest name (argparse namespace or any object); the
    ones that differ from their defaults are forwarded to Locust. Defaults to `settings`.
    """
    out.mkdir(parents=True, exist_ok=True)
    options = settings if options is None else options
    cmd = locust_command(forwarded_arguments(options), load, out)
    recorded = {"sm_locust": {k: v for k, v in asdict(settings).items() if v not in ("", None)},
                "options": {k: v for k, v in vars(options).items() if not k.startswith("_") and not callable(v)},
                "load": asdict(load), "locust_command": cmd[1:]}
    write_json(out / "options.json", recorded)
    env = dict(os.environ)
    env.update(extra_env or {})
    env.setdefault("PYTHONUNBUFFERED", "1")
    print(f"sm-locust: running Locust against {settings.endpoint_name!r}"
          f"{' at ' + settings.endpoint_url if settings.endpoint_url else ''}; results go to {out}/", flush=True)
    with open(out / "locust.log", "wb") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        restore = _forward_sigterm(proc)
        try:
            tail = _pump(proc, log, echo_all=not load.quiet)
        finally:
            restore()
    summary_path = out / "summary.json"
    if proc.returncode == 2:  # Locust's own usage errors (bad option values, workers that never came)
        hint = tail.strip().splitlines()[-1] if tail.strip() else "no output"
        raise UsageError(f"Locust rejected the run ({hint}); full log in {out / 'locust.log'}")
    if proc.returncode != 0 or not summary_path.exists():
        hint = tail.strip().splitlines()[-1] if tail.strip() else "no output"
        raise RunError(f"Locust exited with code {proc.returncode} ({hint}); full log in {out / 'locust.log'}")
    return json.loads(summary_path.read_text())


def _forward_sigterm(proc: subprocess.Popen):
    """Pass SIGTERM on to Locust, which then stops the test and writes its results; returns a function
    that puts the previous handler back.

    In a container sm-locust is PID 1, and `kubectl delete` or a Job's deadline sends SIGTERM to it
    alone: without this Locust would be killed at the end of the grace period with nothing written
    (and nothing uploaded). Only the main thread may set handlers; elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.signal(signal.SIGTERM, lambda _signum, _frame: proc.poll() is None and proc.send_signal(signal.SIGTERM))
    return lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _pump(proc: subprocess.Popen, log, echo_all: bool) -> str:
    """Copy Locust's output to locust.log and echo it (quiet: only progress and errors); return the tail."""
    tail: list[str] = []
    assert proc.stdout is not None
    for raw in proc.stdout:
        log.write(raw)
        line = raw.decode(errors="replace").rstrip()
        tail = (tail + [line])[-20:]
        if echo_all or line.startswith("sm-locust") or "/ERROR/" in line or "/CRITICAL/" in line:
            print(line, flush=True)
    proc.wait()
    return "\n".join(tail)


def verdict_line(summary: dict) -> str:
    t = summary.get("totals", {})
    errors = ", ".join(f"{code} {n}" for code, n in (t.get("errors") or {}).items())
    p95 = t.get("p95_ms")
    goodput = t.get("goodput_rps")
    line = (f"{t.get('requests', 0)} requests, {t.get('rps', 0):.1f} req/s"
            + ("" if goodput is None else f" (goodput {goodput:.1f} req/s)")
            + f", p95 {'-' if p95 is None else f'{p95:.0f}'} ms, {t.get('failures', 0)} failures"
            + (f" ({errors})" if errors else ""))
    backoff = t.get("backoff") or {}
    if backoff.get("count"):  # sm_locust.users.backoff: the endpoint could not be reached
        line += f"; {backoff['count']} back-offs after connection errors ({backoff.get('seconds', 0):.1f} s)"
    open_loop = t.get("open_loop")
    if open_loop:
        line += (f"; open loop: {open_loop.get('sent', 0)} sent, {open_loop.get('late_fraction', 0) * 100:.1f} % late, "
                 f"{open_loop.get('dropped', 0)} dropped")
    plateau = summary.get("plateau")
    if plateau and plateau.get("text"):
        line += f"\n{plateau['text']}"
    return line
