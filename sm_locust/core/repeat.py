"""`sm-locust run --repeat N`: the same planned run N times, each into its own run folder under one
parent, then the run-to-run spread beside the within-run interval (`record.repeat`: repeat.json).

Why in the core: a repeated run is N normal runs (`core.start.start_run`, every check and the
preflight each time), so every run folder is what `sm-locust run` writes and every reader (report,
smoke --run-dir, compare, `sm_locust.load`) reads each one. The parent holds `repeat.json` (rewritten
after each run, so an interrupted repeat keeps what was measured) and `run-1/` .. `run-N/`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from sm_locust.core.folder import RUN_MARKS, holds_run
from sm_locust.core.plan import RunSettings
from sm_locust.core.start import start_run
from sm_locust.core.verdict import verdict_lines
from sm_locust.errors import UsageError
from sm_locust.record.folders import choose_out_dir
from sm_locust.record.model import Summary
from sm_locust.record.repeat import REPEAT_JSON, repeat_document
from sm_locust.record.summary import write_json
from sm_locust.util.outputs import check_output_dir

RUN_PREFIX = "run-"


def check_parent(parent: Path, overwrite: bool) -> None:
    """Refuse, before anything runs, a parent folder that holds one run, or earlier repeated runs
    (unless --overwrite), or cannot be written."""
    if parent.is_dir() and holds_run(parent):
        raise UsageError(f"--out {parent} holds a run ({', '.join(RUN_MARKS[:1])}), not repeated runs; choose another "
                         "folder for --repeat")
    if parent.is_dir() and (parent / REPEAT_JSON).exists() and not overwrite:
        raise UsageError(f"--out {parent} already holds repeated runs ({REPEAT_JSON}); pass --overwrite to replace "
                         "them, or another folder")
    check_output_dir(parent)


def start_repeated(run: RunSettings, *, echo: Callable[[str], None] | None = None, env: dict[str, str] | None = None,
                   say: Callable[[str], None] = print) -> tuple[Path, dict, list[Summary]]:
    """Run `run.repeat` times; returns (parent folder, repeat.json's document, each run's summary)."""
    parent = choose_out_dir(run.out, run.endpoint.endpoint_name)
    check_parent(parent, run.overwrite)
    summaries: list[Summary] = []
    folders: list[str] = []
    document: dict = {}
    for k in range(1, run.repeat + 1):
        name = f"{RUN_PREFIX}{k}"
        upload = run.upload.child(parent.resolve().name) if run.upload is not None else None
        one = dataclasses.replace(run, out=str(parent / name), repeat=1, upload=upload)
        say(f"sm-locust: repeat {k} of {run.repeat}: {parent / name}/")
        _, summary = start_run(one, echo=echo, env=env)
        for line in verdict_lines(summary):
            say(f"sm-locust: repeat {k} of {run.repeat}: {line}")
        summaries.append(summary)
        folders.append(name)
        document = repeat_document([s.to_json() for s in summaries], folders)
        write_json(parent / REPEAT_JSON, document)
    return parent, document, summaries
