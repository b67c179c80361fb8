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

Readers: `read_seconds` / `iter_seconds` (every field, as `Second`s) and `read_count_lines` (only
`t`, `requests`, `failures`, line by line); the report's fast reader (pyarrow, into a DataFrame) is
`record.runfolder.read_timeline`. A last line cut mid-write (the process was killed) is left out.
Nothing here imports pandas: this module runs inside every Locust process.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import BinaryIO, cast

import orjson

from sm_locust.measure.timeline import Second
from sm_locust.util.outputs import open_output
from sm_locust.util.yamlsafe import load_json

TIMELINE_JSONL = "timeline.jsonl"
TIMELINE_JSON = "timeline.json"  # folders written before timeline.jsonl existed
FLUSH_EVERY_S = 5.0


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

    def __init__(self, path: str | Path, flush_every_s: float = FLUSH_EVERY_S, clock=time.monotonic,
                 append: bool = False):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.flush_every_s = flush_every_s
        self._clock = clock
        mode = "ab" if append else "wb"  # append: a master's seconds that arrived after the stop
        self._fh: BinaryIO | None = cast(BinaryIO, open_output(self.path, mode, buffering=0))  # close() closes it
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


def whole_lines_size(path: Path) -> tuple[int, bool]:
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


def read_count_lines(lines: Iterator[bytes]) -> tuple[list[float], list[int], list[int], int]:
    """(t, requests, failures, unreadable lines) of timeline.jsonl lines, parsed one by one (orjson)."""
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
    return t, requests, failures, bad


def read_seconds(path: Path) -> list[Second]:
    """Every `Second` of a timeline file (timeline.jsonl or an older timeline.json); a cut last line
    is left out. For tools and tests: the report reads only the counts (`runfolder.read_timeline`)."""
    if path.suffix == ".json":
        return [decode_record(d) for d in load_json(path.read_text(encoding="utf-8"))]
    return list(iter_seconds(path))


def iter_seconds(path: Path) -> Iterator[Second]:
    """The seconds of timeline.jsonl one at a time (bounded memory); a cut last line is left out."""
    size, _cut = whole_lines_size(path)
    with open(path, "rb") as fh:
        for line in head_reader(fh, size):
            if line.strip():
                yield decode_record(orjson.loads(line))
