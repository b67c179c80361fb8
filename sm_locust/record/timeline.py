"""`timeline.jsonl`: the run's per-second samples, one JSON line each, written as they are taken.

Why a file that grows line by line: a soak test runs for days, and a Locust process can die at any
moment (an OOM kill, a lost master). The recorder appends each `Second` here as it is taken and
flushes every `FLUSH_EVERY_S` seconds, so a crash loses at most those seconds, and memory does not
have to hold the run (the recorder keeps only what decisions need: `record.accumulate`).

One line is `Second.as_dict()` with the histogram written compactly, `"hist": "20:113 22:41 24:7"`
(response-time bucket in ms : requests, ascending), so a reader that needs only the counts skips a
second's histogram as one string: a week of seconds (605k lines, ~250 MB) reads in about a second
with pyarrow's JSON reader instead of ~4 s when every bucket is a JSON key. Folders from before
this file hold `timeline.json` (one JSON list, `hist` an object); the readers here take both.

Readers: `read_counts` (the report: `t`, `requests`, `failures` per second as a DataFrame; pyarrow
when installed, else orjson line by line) and `read_seconds` (every field, as `Second`s). A last
line cut mid-write (the process was killed) is skipped and named; a damaged line elsewhere is
skipped and counted.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np
import orjson
import pandas as pd

from sm_locust.plateau.timeline import Second

TIMELINE_JSONL = "timeline.jsonl"
TIMELINE_JSON = "timeline.json"  # folders written before timeline.jsonl existed
FLUSH_EVERY_S = 5.0
COUNT_COLUMNS = ("t", "requests", "failures")


# ------------------------------------------------------------------------------------ one line

def encode_hist(hist: Mapping[int, int]) -> str:
    """{20: 113, 22: 41} -> "20:113 22:41" (ascending buckets)."""
    return " ".join(f"{bucket}:{count}" for bucket, count in sorted(hist.items()))


def decode_hist(value) -> dict[int, int]:
    """The compact string, or the object form of timeline.json, -> {bucket: count}."""
    if not value:
        return {}
    if isinstance(value, Mapping):
        return {int(k): int(v) for k, v in value.items()}
    out: dict[int, int] = {}
    for pair in str(value).split():
        bucket, _, count = pair.partition(":")
        out[int(bucket)] = int(count)
    return out


def encode_line(second: Second) -> bytes:
    record = second.as_dict()
    record["hist"] = encode_hist(second.hist)
    return orjson.dumps(record) + b"\n"


def decode_record(record: Mapping) -> Second:
    return Second.from_dict({**record, "hist": decode_hist(record.get("hist"))})


# -------------------------------------------------------------------------------------- writing

class TimelineWriter:
    """Appends seconds to timeline.jsonl; whole lines reach the file every `flush_every_s` seconds
    (one unbuffered write each time, so a killed process leaves at most one line cut short)."""

    def __init__(self, path: str | Path, flush_every_s: float = FLUSH_EVERY_S, clock=time.monotonic):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.flush_every_s = flush_every_s
        self._clock = clock
        self._fh = open(self.path, "wb", buffering=0)  # kept open for the run; close() closes it
        self._pending: list[bytes] = []
        self._flushed_at = clock()
        self.lines = 0

    def add(self, second: Second) -> None:
        self._pending.append(encode_line(second))
        self.lines += 1
        if self._clock() - self._flushed_at >= self.flush_every_s:
            self.flush()

    def flush(self) -> None:
        self._flushed_at = self._clock()
        if self._pending and self._fh is not None:
            self._fh.write(b"".join(self._pending))
            self._pending.clear()

    def close(self) -> None:
        if self._fh is not None:
            self.flush()
            self._fh.close()
            self._fh = None

    @property
    def closed(self) -> bool:
        return self._fh is None


# -------------------------------------------------------------------------------------- reading

def timeline_path(run_dir: Path) -> Path | None:
    """The folder's timeline file: timeline.jsonl, else an older folder's timeline.json, else None."""
    for name in (TIMELINE_JSONL, TIMELINE_JSON):
        path = run_dir / name
        if path.is_file():
            return path
    return None


class _Head(io.RawIOBase):
    """The first `size` bytes of a file (the whole lines of a file whose last line was cut)."""

    def __init__(self, fh, size: int):
        self._fh, self._left = fh, size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._left <= 0:
            return 0
        view = memoryview(buffer)[: self._left]
        n = self._fh.readinto(view) or 0
        self._left -= n
        return n


def head_reader(fh, size: int) -> io.BufferedReader:
    """A buffered reader over the first `size` bytes of the open binary file `fh`."""
    return io.BufferedReader(_Head(fh, size), buffer_size=1 << 20)


def _whole_lines_size(path: Path) -> tuple[int, bool]:
    """(bytes up to and including the last newline, whether a cut last line follows them)."""
    size = path.stat().st_size
    if size == 0:
        return 0, False
    with open(path, "rb") as fh:
        fh.seek(-1, io.SEEK_END)
        if fh.read(1) == b"\n":
            return size, False
        chunk = 1 << 16
        end = size
        while end > 0:
            start = max(0, end - chunk)
            fh.seek(start)
            block = fh.read(end - start)
            at = block.rfind(b"\n")
            if at >= 0:
                return start + at + 1, True
            end = start
    return 0, True


def _frame(t, requests, failures) -> pd.DataFrame:
    return pd.DataFrame({"t": np.asarray(t, dtype="float64"), "requests": np.asarray(requests, dtype="int64"),
                         "failures": np.asarray(failures, dtype="int64")})


def _counts_arrow(source) -> pd.DataFrame:
    import pyarrow as pa
    import pyarrow.json as pajson

    schema = pa.schema([("t", pa.float64()), ("requests", pa.int64()), ("failures", pa.int64())])
    table = pajson.read_json(source, parse_options=pajson.ParseOptions(explicit_schema=schema,
                                                                       unexpected_field_behavior="ignore"))
    frame = table.to_pandas()
    if frame[list(COUNT_COLUMNS)].isna().any().any():
        raise ValueError("a line lacks t, requests or failures")
    return frame.astype({"requests": "int64", "failures": "int64"})


def _counts_lines(lines: Iterator[bytes]) -> tuple[pd.DataFrame, int]:
    t: list[float] = []
    requests: list[int] = []
    failures: list[int] = []
    bad = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
            t.append(float(record["t"]))
            requests.append(int(record["requests"]))
            failures.append(int(record["failures"]))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            bad += 1
    return _frame(t, requests, failures), bad


def read_counts(path: Path, gaps: list[str]) -> pd.DataFrame | None:
    """Per-second `t` (epoch s at the end of the sample), `requests`, `failures` (logical invocations)
    of a timeline file; None when unreadable (a gap). Only these three fields are parsed."""
    what = f"timeline: {path.name}"
    try:
        if path.suffix == ".json":  # an older folder: one JSON list
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, list):
                raise ValueError("not a list of seconds")
            return _frame([float(d["t"]) for d in data], [int(d["requests"]) for d in data],
                          [int(d["failures"]) for d in data])
        size, cut = _whole_lines_size(path)
        if cut:
            gaps.append(f"{what}: the last line was cut off mid-write and was skipped")
        if size == 0:
            return _frame([], [], [])
        with open(path, "rb") as fh:
            try:
                return _counts_arrow(head_reader(fh, size))
            except Exception:  # no pyarrow, or a damaged line: read line by line, skipping the damage
                pass
            fh.seek(0)
            frame, bad = _counts_lines(head_reader(fh, size))
        if bad:
            gaps.append(f"{what}: skipped {bad} unreadable line(s)")
        return frame
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        gaps.append(f"{what} is not readable ({exc}); per-second figures come from the Locust history")
        return None


def read_seconds(path: Path) -> list[Second]:
    """Every `Second` of a timeline file (timeline.jsonl or an older timeline.json); a cut last line
    is left out. For tools and tests: the report reads only the counts (`read_counts`)."""
    if path.suffix == ".json":
        return [decode_record(d) for d in json.loads(path.read_text(encoding="utf-8"))]
    return list(iter_seconds(path))


def iter_seconds(path: Path) -> Iterator[Second]:
    """The seconds of timeline.jsonl one at a time (bounded memory); a cut last line is left out."""
    size, _cut = _whole_lines_size(path)
    with open(path, "rb") as fh:
        for line in head_reader(fh, size):
            if line.strip():
                yield decode_record(orjson.loads(line))
