"""The run folder: where a run's files go, and what may be there before it starts.

`check_out_dir` refuses, before anything starts, a `--out` that cannot be created, that a run is
writing now, or that already holds a run (unless `--overwrite`); `make_out_dir` creates it and, with
`--overwrite`, removes that run's files first (RUN_FILES: no stale report.html or steps.csv beside the
new data, nothing else touched); `discard_out_dir` undoes it after a usage error, never while another
run holds the folder.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from sm_locust.errors import UsageError
from sm_locust.util.outputs import (
    IN_USE,
    PARTIAL_SUFFIX,
    check_output_dir,
    locked_by_another,
    refuse_unusable,
    run_in_progress,
)

# What a run (and `sm-locust report` on it) writes into its folder: removed by --overwrite, and the
# marks of a folder that already holds a run. Nothing else in the folder is touched.
LOCUST_REPORT = "locust_report.html"
LOCUST_REPORT_PARTIAL = f".{LOCUST_REPORT}{PARTIAL_SUFFIX}"  # Locust writes here; renamed once whole (promote)
LOCUST_OUTPUTS = (LOCUST_REPORT_PARTIAL, "locust_stats.csv", "locust_stats_history.csv", "locust_failures.csv",
                  "locust_exceptions.csv")  # the files Locust itself writes into a run folder
RUN_FILES = ("summary.json", "timeline.jsonl", "timeline.json", "options.json", "locust.log", LOCUST_REPORT,
             f".*{PARTIAL_SUFFIX}", "locust_*.csv", "endpoint.log", "report.html", "steps.csv", "hourly.csv",
             "merged_timeseries.csv")
RUN_MARKS = ("summary.json", "options.json", "locust_stats.csv", "locust_stats_history.csv")


def holds_run(folder: Path) -> bool:
    return any((folder / name).is_file() for name in RUN_MARKS)


def check_out_dir(out: Path, *, overwrite: bool = False, flag: str = "--out") -> None:
    """Refuse, before anything starts, a run folder that cannot be created or already holds a run
    (unless `overwrite`), or that a run is writing now. Creates nothing."""
    refuse_unusable(out, flag)  # a name too long, a symlink loop: before anything asks whether it is a folder
    if out.is_dir() and run_in_progress(out):
        raise UsageError(f"{flag} {out} {IN_USE}")
    if out.is_dir() and holds_run(out) and not overwrite:
        raise UsageError(f"{flag} {out} already holds a run (summary.json, locust_*.csv); pass --overwrite to "
                         "replace it, or another folder")
    check_output_dir(out, flag)


def make_out_dir(out: Path, *, overwrite: bool = False, flag: str = "--out") -> bool:
    """Create the run folder (a one-line UsageError when the system refuses, e.g. under /proc); with
    `overwrite`, remove an earlier run's files from it. Returns True when this call created it."""
    try:  # created by this call only if its own mkdir made it (two runs into one folder: one of them did)
        out.mkdir(parents=True)
        created = True
    except FileExistsError:
        created = False
    except OSError as exc:
        raise UsageError(f"{flag} {out} cannot be created: {exc.strerror or exc}") from None
    if overwrite and not created:
        remove_run_files(out)
    return created


def remove_run_files(folder: Path) -> list[Path]:
    """Delete the files a run wrote into `folder` (RUN_FILES); returns them."""
    removed = []
    for pattern in RUN_FILES:
        for path in folder.glob(pattern):
            if path.is_file():
                path.unlink()
                removed.append(path)
    return removed


def discard_out_dir(out: Path, created: bool) -> None:
    """Undo a run folder after a usage error: the folder if this run created it, else the run's files;
    nothing while another run (another thread of this process too) holds the folder: it is that run's."""
    if locked_by_another(out):
        return
    if created:
        shutil.rmtree(out, ignore_errors=True)
    elif out.is_dir():
        remove_run_files(out)
