"""The one reader of a finished run folder: `RunData`, for `sm_locust.report` and `sm_locust.gates`.

`read_run` (the report) is tolerant: `N/A` cells, a cut last line, a missing file or summary.json
each become a line in `gaps`, not an exception. `load_run` (gates, `--baseline`) needs a readable
summary.json with `totals`, since totals come only from it (the CSVs can miss the last second,
docs/facts.md, Locust). A checkpointed `complete: false` summary makes `RunData.interrupted` one line.
Large history CSVs go through pyarrow (the tolerant reader when it is missing or a row is bad). A CSV
that is not Locust's is a `UsageError` naming the missing columns; columns are renamed at the edge
(`p95_ms`, `rps`), so no consumer sees Locust's spelling.
"""

from __future__ import annotations

import io
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sm_locust.errors import UsageError
from sm_locust.invocation import is_latency_series
from sm_locust.record.model import JsonObject, ShapeError, Summary, Totals
from sm_locust.record.schema import check_summary, drop_malformed_rows
from sm_locust.record.timeline import head_reader, read_count_lines, timeline_path, whole_lines_size
from sm_locust.util.yamlsafe import load_json

PREFIX = "locust"
SUMMARY_JSON = "summary.json"
OPTIONS_JSON = "options.json"
STATS_CSV = f"{PREFIX}_stats.csv"
HISTORY_CSV = f"{PREFIX}_stats_history.csv"
FAILURES_CSV = f"{PREFIX}_failures.csv"
AGGREGATED = "Aggregated"  # Locust's name for the total row of its CSVs
NA_VALUES = ["N/A", "n/a", "NaN", ""]

# Locust percentile column -> our column.
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
# What a consumer reads from it (the gates' per-name figures); the percentiles may be absent or N/A.
STATS_REQUIRED = ("Name", "Request Count", "Failure Count", "Requests/s")

FAILURES_COLUMNS = {"Method": "method", "Name": "name", "Error": "error", "Occurrences": "occurrences"}
FAILURES_REQUIRED = ("Error", "Occurrences")


def _number(value: Any) -> float | None:
    """A number, or None for a missing, `N/A`, NaN or non-numeric value."""
    if value is None or value == "" or value == "N/A":
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


@dataclass(frozen=True)
class Metrics:
    """Invocations, failures, attempt rate, goodput and latency percentiles of one scope (the run or one name).

    `rps` counts every invocation attempted; `goodput_rps` only the successful ones (derived from
    `rps` and the error rate when the source has no goodput: runs from before it was recorded).
    """

    requests: int = 0
    failures: int = 0
    rps: float = 0.0
    p50_ms: float | None = None
    p95_ms: float | None = None
    p99_ms: float | None = None
    goodput_rps: float | None = None

    def __post_init__(self) -> None:
        if self.goodput_rps is None:
            object.__setattr__(self, "goodput_rps", self.rps * (1.0 - self.error_rate))

    @property
    def successes(self) -> int:
        return self.requests - self.failures

    @property
    def error_rate(self) -> float:
        return self.failures / self.requests if self.requests else 0.0

    def percentile(self, pct: int) -> float | None:
        return {50: self.p50_ms, 95: self.p95_ms, 99: self.p99_ms}[pct]

    @classmethod
    def from_totals(cls, totals: Totals | JsonObject) -> Metrics:
        """summary.json's `totals` object, or one of its `by_name` records (docs/summary.md)."""
        if not isinstance(totals, Totals):
            totals = Totals.from_json(totals, check=False)
        return cls(requests=int(_number(totals.requests) or 0), failures=int(_number(totals.failures) or 0),
                   rps=float(_number(totals.rps) or 0.0), p50_ms=_number(totals.p50_ms),
                   p95_ms=_number(totals.p95_ms), p99_ms=_number(totals.p99_ms),
                   goodput_rps=_number(totals.goodput_rps))


def summary_by_name(summary: Summary | JsonObject) -> dict[str, Metrics] | None:
    """summary.json's exact per-name figures (`by_name`), None when the run has none (older runs)."""
    records = (summary if isinstance(summary, Summary) else _lenient(summary)).by_name
    if records is None:
        return None
    return {str(name): Metrics.from_totals(record) for name, record in records.items()}


def _lenient(summary: JsonObject) -> Summary:
    """summary.json's object as typed records, without judging it (a folder's was judged when read;
    an in-process run's is this process's own); an object of the wrong shape reads as empty."""
    try:
        return Summary.from_json(summary, check=False)
    except (ShapeError, TypeError, AttributeError, KeyError, IndexError):
        return Summary()


def per_name_metrics(stats: pd.DataFrame | None) -> dict[str, Metrics]:
    """`read_stats`' frame -> {request name: Metrics}, without the Aggregated row and the latency
    series (TTFT, InterChunk: not requests); a name's rows of several request types are added up
    (percentiles: the busiest row's, the CSV holds no histogram)."""
    out: dict[str, Metrics] = {}
    if stats is None:
        return out
    for row in stats.to_dict("records"):
        name = row.get("name")
        if not isinstance(name, str) or not name or name == AGGREGATED:
            continue
        kind = row.get("type")
        if isinstance(kind, str) and is_latency_series(kind):
            continue
        requests = int(_number(row.get("requests")) or 0)
        metrics = Metrics(requests=requests, failures=int(_number(row.get("failures")) or 0),
                          rps=float(_number(row.get("rps")) or 0.0),
                          p50_ms=_number(row.get("p50_ms")) if requests else None,
                          p95_ms=_number(row.get("p95_ms")) if requests else None,
                          p99_ms=_number(row.get("p99_ms")) if requests else None)
        seen = out.get(name)
        if seen is not None:
            busiest = seen if seen.requests >= metrics.requests else metrics
            metrics = Metrics(requests=seen.requests + metrics.requests, failures=seen.failures + metrics.failures,
                              rps=seen.rps + metrics.rps, p50_ms=busiest.p50_ms, p95_ms=busiest.p95_ms,
                              p99_ms=busiest.p99_ms)
        out[name] = metrics
    return out


@dataclass
class RunData:
    """A finished run: what its folder holds. Absent parts are None (frames) or {} (JSON), named in `gaps`.

    `by_name` defaults to summary.json's exact per-name figures, else (an older run) those of
    `stats`, the lagging CSV.
    """

    run_dir: Path | None = None
    summary: dict[str, Any] = field(default_factory=dict)  # summary.json's object (`record`: the same, typed)
    options: dict[str, Any] = field(default_factory=dict)
    history: pd.DataFrame | None = None  # Aggregated rows of locust_stats_history.csv, one per second
    stats: pd.DataFrame | None = None  # locust_stats.csv: one row per request name plus Aggregated
    failures: pd.DataFrame | None = None
    gaps: list[str] = field(default_factory=list)  # missing or damaged data (the report's exit code 1)
    notes: list[str] = field(default_factory=list)  # informational
    by_name: dict[str, Metrics] = field(default_factory=dict)  # empty: read from summary.json, else the CSV
    source: str = ""  # where it came from, for messages (the folder by default)
    timeline: pd.DataFrame | None = None  # timeline.jsonl: t, requests, failures per second (None: an older run)

    record: Summary = field(init=False, repr=False)  # summary.json as typed records (`record.model`)

    def __post_init__(self) -> None:
        self.record = _lenient(self.summary)
        if not self.by_name:
            exact = summary_by_name(self.record)
            self.by_name = exact if exact is not None else per_name_metrics(self.stats)
        if not self.source and self.run_dir is not None:
            self.source = str(self.run_dir)

    @property
    def totals(self) -> Metrics:
        """The whole run, from summary.json (zeros when it has none)."""
        return Metrics.from_totals(self.record.totals)

    @property
    def folder(self) -> Path:
        """The run folder this was read from (`read_run` always sets it)."""
        if self.run_dir is None:
            raise ValueError(f"{self.source or 'this run'} was not read from a run folder")
        return self.run_dir

    def scope(self, name: str | None) -> Metrics | None:
        """Totals for None, else the named entry (None when the run has no such name)."""
        return self.totals if name is None else self.by_name.get(name)

    @property
    def interrupted(self) -> str | None:
        """One line when the run did not end normally (summary.json `complete: false`), else None."""
        return interrupted_line(self.record)


def interrupted_line(summary: Summary | JsonObject) -> str | None:
    """'the run did not end normally ...' for a summary.json that is a checkpoint, else None (a
    finished run, or one from before `complete` was written)."""
    record = summary if isinstance(summary, Summary) else _lenient(summary)
    if not record.killed:
        return None
    started, ended = record.started_at or "?", record.ended_at or "?"
    return (f"the run did not end normally (its Locust process was killed or crashed): summary.json is its last "
            f"checkpoint, written at {ended}; the figures cover {started} .. {ended}")


# ---------------------------------------------------------------------------------- the files

def _read_text_tolerant(path: Path, what: str, gaps: list[str]) -> str | None:
    """File text with a cut-off last line removed (a run killed mid-write leaves one).

    A last line with no newline and fewer fields than the header was cut mid-write; it is
    dropped and named. One with all its fields is kept (a file saved without a final newline).
    """
    if path.exists() and not path.is_file():  # a FIFO would block the read for ever
        gaps.append(f"{what}: {path.name} is not a regular file")
        return None
    try:  # utf-8-sig: a CSV saved again from Excel ("CSV UTF-8") starts with a byte-order mark
        text = path.read_text(encoding="utf-8-sig", errors="replace")
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


def _read_csv(path: Path, what: str, gaps: list[str], required: tuple[str, ...], *,
              check_rows: bool = False) -> pd.DataFrame | None:
    text = _read_text_tolerant(path, what, gaps)
    if text is None:
        return None
    if check_rows:  # malformed rows counted in gaps, or the file refused (record/schema.py)
        text = drop_malformed_rows(text, path, what, gaps)
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


class _Fallback(Exception):
    """The fast reader cannot take this file: the tolerant one reads it."""


def _history_arrow(path: Path, gaps: list[str]) -> pd.DataFrame:
    """The Aggregated rows of the history CSV, Locust's column names, with pyarrow (see the module doc).
    Raises `_Fallback` (or ImportError) for anything the tolerant reader handles: no pyarrow, a
    missing or empty file, a malformed row, a Timestamp that is not whole seconds."""
    # lazy: pyarrow, optional at run time (the tolerant pandas reader takes over without it)
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            header_line = fh.readline()
            fh.seek(max(0, size - (1 << 16)))
            tail = fh.read()
    except OSError:
        raise _Fallback() from None
    if size == 0 or not header_line.strip() or header_line.startswith(b"\xef\xbb\xbf"):  # a BOM: the tolerant reader
        raise _Fallback()
    header = header_line.decode("utf-8", errors="replace").rstrip("\r\n").split(",")
    _check_columns(pd.DataFrame(columns=header), HISTORY_REQUIRED, path)
    limit = size
    if not tail.endswith(b"\n"):  # a last line cut mid-write: skipped and named (as _read_text_tolerant does)
        head, sep, last = tail.rpartition(b"\n")
        if sep and last.count(b",") < len(header) - 1:
            limit = size - len(last)
            gaps.append(f"Locust history: the last line of {path.name} was cut off mid-write and was skipped")
    wanted = [c for c in HISTORY_COLUMNS if c in header]
    types = {c: pa.float64() for c in wanted}
    types.update({"Timestamp": pa.int64(), "Name": pa.string(), "Type": pa.string()})
    options = pacsv.ConvertOptions(include_columns=wanted, null_values=NA_VALUES, strings_can_be_null=True,
                                   column_types=types)
    batches = []
    with open(path, "rb") as fh:
        try:  # batch by batch, keeping only the Aggregated rows: a week's 1.2 M rows never sit in memory
            reader = pacsv.open_csv(head_reader(fh, limit), read_options=pacsv.ReadOptions(block_size=8 << 20),
                                    convert_options=options)
            for batch in reader:
                keep = pc.fill_null(pc.equal(batch.column("Name"), AGGREGATED), False)
                batches.append(batch.filter(keep).drop_columns([c for c in ("Name", "Type")
                                                                if c in batch.schema.names]))
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # a malformed row, a value that is not a number
            raise _Fallback() from None
    if not batches:
        raise _Fallback()
    table = pa.Table.from_batches(batches)
    del batches
    frame = table.to_pandas(self_destruct=True, split_blocks=True)
    del table
    pa.default_memory_pool().release_unused()  # give the parsing buffers back before the report's next steps
    return frame


def _history_frame(path: Path, gaps: list[str]) -> pd.DataFrame | None:
    """Aggregated history rows, our column names, numbers (fast reader first, see the module doc)."""
    fast_gaps: list[str] = []
    try:
        df = _history_arrow(path, fast_gaps)
    except (ImportError, _Fallback):
        df = None
    if df is not None:
        gaps.extend(fast_gaps)
        df = df.rename(columns=HISTORY_COLUMNS)
        return _numeric(df, [c for c in df.columns if not pd.api.types.is_numeric_dtype(df[c])])
    df = _read_csv(path, "Locust history", gaps, HISTORY_REQUIRED, check_rows=True)
    if df is None:
        return None
    df = df.rename(columns=HISTORY_COLUMNS)
    df = df[df["name"].fillna("") == AGGREGATED].copy()
    df = df[[c for c in HISTORY_COLUMNS.values() if c in df.columns]]
    return _numeric(df, [c for c in df.columns if c not in ("type", "name")])


def read_stats_history(path: Path, gaps: list[str]) -> pd.DataFrame | None:
    """Aggregated rows of `_stats_history.csv`: one row per second, sorted, our column names.

    Rows for individual request names are dropped (the Aggregated row is their total). Duplicate
    timestamps keep the last row written.
    """
    df = _history_frame(path, gaps)
    if df is None:
        return None
    df = df.dropna(subset=["epoch_s"])
    if df.empty:
        gaps.append(f"Locust history: {path.name} has no Aggregated rows")
        return None
    df["epoch_s"] = df["epoch_s"].astype("int64")
    df = df.drop(columns=[c for c in ("type", "name") if c in df.columns])
    df = df.drop_duplicates(subset="epoch_s", keep="last").sort_values("epoch_s").reset_index(drop=True)
    return df


def read_stats(path: Path, gaps: list[str]) -> pd.DataFrame | None:
    """`_stats.csv` with our column names (one row per request name plus `Aggregated`)."""
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


def _timeline_frame(t, requests, failures) -> pd.DataFrame:
    return pd.DataFrame({"t": np.asarray(t, dtype="float64"), "requests": np.asarray(requests, dtype="int64"),
                         "failures": np.asarray(failures, dtype="int64")})


def _timeline_arrow(source) -> pd.DataFrame:
    """t, requests, failures of timeline.jsonl with pyarrow's JSON reader (each `hist` string skipped)."""
    # lazy: pyarrow, optional at run time (the line-by-line reader takes over without it)
    import pyarrow as pa
    import pyarrow.json as pajson

    schema = pa.schema([("t", pa.float64()), ("requests", pa.int64()), ("failures", pa.int64())])
    table = pajson.read_json(source, parse_options=pajson.ParseOptions(explicit_schema=schema,
                                                                       unexpected_field_behavior="ignore"))
    if any(table.column(name).null_count for name in schema.names):
        raise ValueError("a line lacks t, requests or failures")
    return table.to_pandas()


def read_timeline_counts(path: Path, gaps: list[str]) -> pd.DataFrame | None:
    """Per-second `t` (epoch s at the end of the sample), `requests`, `failures` (logical invocations)
    of timeline.jsonl (or an older timeline.json); None when unreadable (a gap). Only these three
    fields are parsed: with pyarrow when installed, else line by line (which also skips damaged
    lines, counted in a gap)."""
    what = f"timeline: {path.name}"
    if not path.is_file():  # a FIFO would block the read for ever
        gaps.append(f"{what} is not a regular file; per-second figures come from the Locust history")
        return None
    try:
        if path.suffix == ".json":  # an older folder: one JSON list
            data = load_json(path.read_text(encoding="utf-8"))
            if not isinstance(data, list):
                raise ValueError("not a list of seconds")
            return _timeline_frame([float(d["t"]) for d in data], [int(d["requests"]) for d in data],
                                   [int(d["failures"]) for d in data])
        size, cut = whole_lines_size(path)
        if cut:
            gaps.append(f"{what}: the last line was cut off mid-write and was skipped")
        with open(path, "rb") as fh:
            if size:
                try:
                    return _timeline_arrow(head_reader(fh, size))
                except Exception:  # no pyarrow, or a damaged line: line by line below, skipping the damage
                    fh.seek(0)
            t, requests, failures, bad = read_count_lines(head_reader(fh, size))
        if bad:
            gaps.append(f"{what}: skipped {bad} unreadable line(s)")
        return _timeline_frame(t, requests, failures)
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        gaps.append(f"{what} is not readable ({exc}); per-second figures come from the Locust history")
        return None


def read_timeline(run_dir: Path, gaps: list[str]) -> pd.DataFrame | None:
    """The folder's per-second invocations (`t`, `requests`, `failures`) from timeline.jsonl (or an
    older timeline.json); None when there is none (runs from before it existed: not a gap) or it is
    damaged (a gap)."""
    path = timeline_path(run_dir)
    return None if path is None else read_timeline_counts(path, gaps)


MAX_JSON_BYTES = 64 << 20
"""A run folder's JSON file (summary.json, options.json) is read whole, and no run writes one this large:
a 1-GB summary.json given as `smoke --baseline` was read whole before it was refused."""


def read_json_text(path: Path, what: str = "") -> str:
    """`path`'s text, read only when it is at most `MAX_JSON_BYTES` (UsageError otherwise)."""
    with open(path, "rb") as fh:
        data = fh.read(MAX_JSON_BYTES + 1)
    if len(data) > MAX_JSON_BYTES:
        raise UsageError(f"{what + ' ' if what else ''}{path} is over {MAX_JSON_BYTES >> 20} MB; no run writes one "
                         "this large: is it an sm-locust run folder?")
    return data.decode("utf-8")


def read_json(path: Path, what: str, gaps: list[str]) -> dict[str, object]:
    """A JSON object from `path`; missing or unreadable -> {} and a gap."""
    if path.exists() and not path.is_file():  # a FIFO would block the read for ever
        gaps.append(f"{what}: {path.name} is not a regular file")
        return {}
    try:
        data = load_json(read_json_text(path))
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


# --------------------------------------------------------------------------------- the folder

def is_run_dir(path: Path) -> bool:
    return path.is_dir() and (
        (path / SUMMARY_JSON).is_file() or (path / HISTORY_CSV).is_file() or (path / STATS_CSV).is_file()
    )


def _read_folder(path: Path, summary: dict[str, object], gaps: list[str]) -> RunData:
    options = read_json(path / OPTIONS_JSON, "options", gaps)
    history = read_stats_history(path / HISTORY_CSV, gaps)
    stats = read_stats(path / STATS_CSV, gaps)
    failures = read_failures(path / FAILURES_CSV, gaps)
    timeline = read_timeline(path, gaps)
    interrupted = interrupted_line(summary)
    if interrupted:
        gaps.insert(0, interrupted)
    return RunData(path, summary, options, history, stats, failures, gaps, timeline=timeline)


def read_run(run_dir: str | os.PathLike[str]) -> RunData:
    """Everything a report needs from a run folder; what is missing or damaged is named in `gaps`."""
    path = Path(run_dir)
    if not path.is_dir():
        raise UsageError(f"{path} is not a folder; pass the run folder written by `sm-locust run`")
    if not is_run_dir(path):
        raise UsageError(
            f"{path} is not a run folder: it holds neither {SUMMARY_JSON} nor {PREFIX}_stats*.csv"
        )
    gaps: list[str] = []
    summary = check_summary(read_json(path / SUMMARY_JSON, "summary", gaps), path / SUMMARY_JSON)
    if not summary and not (path / HISTORY_CSV).is_file() and not (path / STATS_CSV).is_file():
        # nothing readable at all: a report of it would be every gap there is (was: exit 1, a line per gap)
        raise UsageError(f"{path} is not a readable run folder: {gaps[0] if gaps else SUMMARY_JSON + ' is empty'}, "
                         f"and it holds no {PREFIX}_stats*.csv")
    return _read_folder(path, summary, gaps)


def load_run(folder: str | os.PathLike[str], *, role: str = "run folder") -> RunData:
    """A run folder the gates can judge: summary.json with a `totals` object is required (UsageError
    naming the folder and `role` otherwise, so `--baseline some/dir` fails in one line)."""
    return _read_folder(Path(folder), read_summary(folder, role=role), [])


def read_summary(folder: str | os.PathLike[str], *, role: str = "run folder") -> dict[str, object]:
    """summary.json of a run folder, held to its schema; a one-line UsageError naming the folder and
    `role` when the folder is not a run (no summary.json, unreadable, no `totals` object)."""
    path = Path(folder)
    if not path.is_dir():
        raise UsageError(f"{role} {str(path)!r} is not a directory")
    summary_path = path / SUMMARY_JSON
    if not summary_path.is_file():
        raise UsageError(f"{role} {str(path)!r} is not a run: it has no {SUMMARY_JSON}")
    try:
        summary = load_json(read_json_text(summary_path, role))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"{role} {str(path)!r}: {SUMMARY_JSON} is not readable JSON ({exc})") from None
    if not isinstance(summary, dict) or not isinstance(summary.get("totals"), dict):
        raise UsageError(f"{role} {str(path)!r}: {SUMMARY_JSON} has no 'totals' object; is it an sm-locust run folder?")
    check_summary(summary, summary_path)
    return summary
