"""Read a run folder into `RunData`: the gates' only I/O.

A run folder is what `sm-locust run` / `smoke` / `demo` write: it must hold a summary.json with a
`totals` object (docs/summary.md); `locust_stats.csv` adds per-name figures when present. Anything
else is a usage error naming the folder, so `--baseline some/dir` fails in one line.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from sm_locust.errors import UsageError
from sm_locust.gates.metrics import RunData


def load_run(folder: str | Path, *, role: str = "run folder") -> RunData:
    path = Path(folder)
    if not path.is_dir():
        raise UsageError(f"{role} {str(path)!r} is not a directory")
    summary_path = path / "summary.json"
    if not summary_path.is_file():
        raise UsageError(f"{role} {str(path)!r} is not a run: it has no summary.json")
    try:
        summary = json.loads(summary_path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{role} {str(path)!r}: summary.json is not readable JSON ({exc})") from None
    if not isinstance(summary, dict) or not isinstance(summary.get("totals"), dict):
        raise UsageError(f"{role} {str(path)!r}: summary.json has no 'totals' object; is it an sm-locust run folder?")
    rows: list[dict] = []
    stats_path = path / "locust_stats.csv"
    if stats_path.is_file():
        with open(stats_path, newline="") as fh:
            rows = list(csv.DictReader(fh))
    return RunData.from_summary(summary, rows, source=str(path))
