"""Readers for a run folder: Locust's CSVs, summary.json and options.json.

A report is most useful exactly when a run went wrong, so the readers accept what a killed or
crashed run leaves behind: `N/A` cells, a last line cut mid-write, a missing file. Each of those
becomes a line in the `gaps` list the report shows, not an exception. What they refuse is a CSV
that is not Locust's at all (another tool's export): that is a `UsageError` naming the columns
that are missing, since no report drawn from it would mean anything.

Columns are renamed to short snake_case names with units (`p95_ms`, `rps`) at the edge, so the
compute layer never sees Locust's spelling.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from sm_locust.errors import UsageError

PREFIX = "locust"
NA_VALUES = ["N/A", "n/a", "NaN", ""]

# Locust percentile column -> report column.
PERCENTILES = {
    "50%": "p50_ms", "66%": "p66_ms", "75%": "p75_ms", "80%": "p80_ms", "90%": "p90_ms",
    "95%": "p95_ms", "98%": "p98_ms", "99%": "p99_ms", "99.9%": "p999_ms", "99.99%": "p9999_ms",
    "100%": "p100_ms",
}

HISTORY_COLUMNS = {
    "Timestamp": "epoch_s", "User Count": "users", "Type": "type", "Name": "name",
    "Requests/s": "rps", "Failures/s": "failures_per_s", **PERCENTILES,
    "Total Request Count": "total_requests", "Total Failure Count": "total_failures",
    "Total Median Response Time": "total_median_ms", "Total Average Response Time": "total_avg_ms",
    "Total Min Response Time": "total_min_ms", "Total Max Response Time": "total_max_ms",
    "Total Average Content Size": "total_avg_bytes",
}
HISTORY_REQUIRED = ("Timestamp", "User Count", "Name", "Requests/s", "Failures/s",
                    "Total Request Count", "Total Failure Count")

STATS_COLUMNS = {
    "Type": "type", "Name": "name", "Request Count": "requests", "Failure Count": "failures",
    "Median Response Time": "median_ms", "Average Response Time": "avg_ms",
    "Min Response Time": "min_ms", "Max Response Time": "max_ms",
    "Average Content Size": "avg_bytes", "Requests/s": "rps", "Failures/s": "failures_per_s",
    **PERCENTILES,
}
STATS_REQUIRED = ("Name", "Request Count", "Failure Count", "Average Response Time", "Requests/s")

FAILURES_COLUMNS = {"Method": "method", "Name": "name", "Error": "error", "Occurrences": "occurrences"}
FAILURES_REQUIRED = ("Error", "Occurrences")


@dataclass
class RunData:
    """Everything read from one run folder; absent parts are None and named in `gaps`."""

    run_dir: Path
    summary: dict[str, Any]
    options: dict[str, Any]
    history: pd.DataFrame | None  # Aggregated rows of _stats_history.csv, one per second
    stats: pd.DataFrame | None
    failures: pd.DataFrame | None
    gaps: list[str] = field(default_factory=list)  # missing or damaged data (exit code 1)
    notes: list[str] = field(default_factory=list)  # informational

    @property
    def endpoint(self) -> str | None:
        return self.summary.get("endpoint") or self.options.get("endpoint_name") or self.options.get("endpoint")


def _read_text_tolerant(path: Path, what: str, gaps: list[str]) -> str | None:
    """File text with a cut-off last line removed (a run killed mid-write leaves one).

    A last line with no newline and fewer fields than the header was cut mid-write; it is
    dropped and named. One with all its fields is kept (a file saved without a final newline).
    """
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        gaps.append(f"{what}: {path.name} is missing")
        return None
    if text and not text.endswith("\n"):
        head, sep, last = text.rpartition("\n")
        header = head.split("\n", 1)[0]
        if sep and last.count(",") < header.count(","):
            gaps.append(f"{what}: the last line of {path.name} was cut off mid-write and was skipped")
            text = head + "\n"
    return text


def _check_columns(df: pd.DataFrame, required: tuple[str, ...], path: Path) -> None:
    missing = [c for c in required if c not in df.columns]
    if missing:
        found = ", ".join(repr(c) for c in list(df.columns)[:8]) + ("..." if len(df.columns) > 8 else "")
        raise UsageError(
            f"{path} is not a Locust CSV: missing column(s) {', '.join(repr(c) for c in missing)} "
            f"(found {found})"
        )


_TEXT_DTYPES = {"Name": str, "Type": str, "Error": str, "Method": str}


def _read_csv(path: Path, what: str, gaps: list[str], required: tuple[str, ...]) -> pd.DataFrame | None:
    text = _read_text_tolerant(path, what, gaps)
    if text is None:
        return None
    if not text.strip():
        gaps.append(f"{what}: {path.name} is empty")
        return None
    bad: list[list[str]] = []
    try:  # the fast C engine first; the python engine only to skip over-long lines
        df = pd.read_csv(io.StringIO(text), na_values=NA_VALUES, keep_default_na=False, dtype=_TEXT_DTYPES)
    except pd.errors.ParserError:
        df = pd.read_csv(io.StringIO(text), na_values=NA_VALUES, keep_default_na=False, dtype=_TEXT_DTYPES,
                         engine="python", on_bad_lines=lambda line: bad.append(line))
    _check_columns(df, required, path)
    if bad:
        gaps.append(f"{what}: skipped {len(bad)} malformed line(s) in {path.name}")
    return df


def _numeric(df: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    for col in columns:
        if col in df.columns:
            df[col] = pd.to_numeric(df[col], errors="coerce")
    return df


def read_stats_history(path: Path, gaps: list[str]) -> pd.DataFrame | None:
    """Aggregated rows of `_stats_history.csv`: one row per second, sorted, report column names.

    Rows for individual request names are dropped (the Aggregated row is their total). Duplicate
    timestamps keep the last row written.
    """
    df = _read_csv(path, "Locust history", gaps, HISTORY_REQUIRED)
    if df is None:
        return None
    df = df.rename(columns=HISTORY_COLUMNS)
    df = df[df["name"].fillna("") == "Aggregated"].copy()
    df = _numeric(df, [c for c in df.columns if c not in ("type", "name")])
    df = df.dropna(subset=["epoch_s"])
    if df.empty:
        gaps.append(f"Locust history: {path.name} has no Aggregated rows")
        return None
    df["epoch_s"] = df["epoch_s"].astype("int64")
    df = df.drop(columns=[c for c in ("type", "name") if c in df.columns])
    df = df.drop_duplicates(subset="epoch_s", keep="last").sort_values("epoch_s").reset_index(drop=True)
    return df


def read_stats(path: Path, gaps: list[str]) -> pd.DataFrame | None:
    """`_stats.csv` with report column names (one row per request name plus `Aggregated`)."""
    df = _read_csv(path, "Locust stats", gaps, STATS_REQUIRED)
    if df is None:
        return None
    df = df.rename(columns=STATS_COLUMNS)
    return _numeric(df, [c for c in df.columns if c not in ("type", "name")])


def read_failures(path: Path, gaps: list[str]) -> pd.DataFrame | None:
    """`_failures.csv` (method, name, error, occurrences); a missing file is a gap, an empty table is not."""
    df = _read_csv(path, "Locust failures", gaps, FAILURES_REQUIRED)
    if df is None:
        return None
    df = df.rename(columns=FAILURES_COLUMNS)
    df["occurrences"] = pd.to_numeric(df["occurrences"], errors="coerce").fillna(0).astype("int64")
    return df


def read_json(path: Path, what: str, gaps: list[str]) -> dict[str, Any]:
    """A JSON object from `path`; missing or unreadable -> {} and a gap."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        gaps.append(f"{what}: {path.name} is missing")
        return {}
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        gaps.append(f"{what}: {path.name} is not valid JSON ({exc})")
        return {}
    if not isinstance(data, dict):
        gaps.append(f"{what}: {path.name} does not hold a JSON object")
        return {}
    return data


def is_run_dir(path: Path) -> bool:
    return path.is_dir() and (
        (path / "summary.json").is_file() or (path / f"{PREFIX}_stats_history.csv").is_file()
        or (path / f"{PREFIX}_stats.csv").is_file()
    )


def read_run(run_dir: str | os.PathLike[str]) -> RunData:
    """Read everything a report needs from a run folder written by `sm-locust run`."""
    path = Path(run_dir)
    if not path.is_dir():
        raise UsageError(f"{path} is not a folder; pass the run folder written by `sm-locust run`")
    if not is_run_dir(path):
        raise UsageError(
            f"{path} is not a run folder: it holds neither summary.json nor {PREFIX}_stats*.csv"
        )
    gaps: list[str] = []
    summary = read_json(path / "summary.json", "summary", gaps)
    options = read_json(path / "options.json", "options", gaps)
    history = read_stats_history(path / f"{PREFIX}_stats_history.csv", gaps)
    stats = read_stats(path / f"{PREFIX}_stats.csv", gaps)
    failures = read_failures(path / f"{PREFIX}_failures.csv", gaps)
    return RunData(path, summary, options, history, stats, failures, gaps)
