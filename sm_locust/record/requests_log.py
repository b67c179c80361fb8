"""`--log-requests`: one row per request in the run folder's `requests.jsonl.gz`, bounded for soak runs.

A row (one JSON object a line): `t` (the send time, epoch seconds), `type` and `name` (the Locust
entry), `e2e_ms`, `ttft_ms`, `itl_p50_ms`, `itl_max_ms`, `input_tokens`, `output_tokens`, `bytes`,
`error` (the failure as summary.json names it, `code: message`, sanitised; null on success) and
`worker` (the Locust process's index). TTFT and ITL are the LLM token accounting's when it ran
(`record.llm`: the token-carrying parts, the server's counts), else the stream's chunk timing; a
non-streamed call has neither.

Cheap on the request path: the Locust `request` listener (fired once per request by
`transport.contract.Measurement`) appends a small row object to a list; the token accounting, which
runs right after the call in the same greenlet, fills its token figures in. A greenlet writes the
rows once a second (`FLUSH_S`), gzip level 1. Bounded: at most `MAX_PENDING` rows wait for a write
(past it rows are dropped and counted); the file is rotated past `ROTATE_BYTES` (`requests.jsonl.gz`
the newest, `requests.1.jsonl.gz` older, ...) and at most `MAX_PARTS` are kept (the oldest part's
rows are then dropped and counted). summary.json's `request_log` says `rows`, `dropped` and `files`.
With workers, each writes its own `requests.wN.jsonl.gz` (N its index); summary.json counts the
master's (none) only. bench/request_log.py measures the per-request cost.
"""

from __future__ import annotations

import contextlib
import gzip
import logging
import os
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gevent
from gevent import getcurrent

import orjson

from sm_locust.invocation import error_code, is_invocation
from sm_locust.sanitize import clean

if TYPE_CHECKING:
    from locust.env import Environment

log = logging.getLogger(__name__)
BASE = "requests"
SUFFIX = ".jsonl.gz"
FLUSH_S = 1.0
MAX_PENDING = 200_000
"""Rows waiting for the once-a-second write: 200k/s is past what one process sends."""
ROTATE_BYTES = 64 << 20
"""Compressed bytes in one part (~1.5 M rows)."""
MAX_PARTS = 16
"""Parts kept: at most ~1 GiB of rows on disk, the newest."""
ERROR_CHARS = 300
ATTRIBUTE = "sm_locust_request_log"

class Row:
    """One request's row, filled by the request event and then by the token accounting."""

    __slots__ = ("t", "type", "name", "e2e_ms", "ttft_ms", "itl", "input_tokens", "output_tokens", "bytes",
                 "error", "awaiting", "turn")

    def __init__(self, t: float, request_type: str, name: str, e2e_ms: float, length: int, error: str | None,
                 ttft_ms: float | None, gaps: Sequence[float] | None, awaiting: bool):
        self.t, self.type, self.name, self.e2e_ms, self.bytes, self.error = t, request_type, name, e2e_ms, length, error
        self.ttft_ms, self.itl, self.awaiting = ttft_ms, gaps, awaiting
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.turn: int | None = None

    def as_dict(self, worker: int) -> dict:
        p50, most = itl_summary(self.itl)
        row = {"t": round(self.t, 3), "type": self.type, "name": self.name, "e2e_ms": _ms(self.e2e_ms),
               "ttft_ms": _ms(self.ttft_ms), "itl_p50_ms": p50, "itl_max_ms": most,
               "input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "bytes": self.bytes,
               "error": self.error, "worker": worker}
        if self.turn is not None:  # --turns: the request's turn in its conversation
            row["turn"] = self.turn
        return row


def _error_text(exception: BaseException) -> str:
    """`code: message` (the code summary.json counts it under), sanitised and cut short."""
    text, code = str(exception), error_code(exception)
    return clean(text if text.startswith(code) else f"{code}: {text}", ERROR_CHARS)


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def itl_summary(gaps: Sequence[float] | None) -> tuple[float | None, float | None]:
    """(median, max) of the inter-token gaps, ms (the median: the lower middle value), or Nones."""
    if not gaps:
        return None, None
    ordered = sorted(gaps)
    return _ms(ordered[(len(ordered) - 1) // 2]), _ms(ordered[-1])


class RotatingGzip:
    """`folder/BASE{tag}.jsonl.gz`, rotated past `rotate_bytes` (compressed), at most `max_parts` kept."""

    def __init__(self, folder: Path, tag: str = "", rotate_bytes: int = ROTATE_BYTES, max_parts: int = MAX_PARTS):
        self.folder, self.tag = folder, tag
        self.rotate_bytes, self.max_parts = rotate_bytes, max(1, max_parts)
        self.part_rows: list[int] = [0]
        """Rows per part kept, the newest first."""
        self.dropped = 0
        self.opened = False
        self._raw: Any = None
        self._gzip: gzip.GzipFile | None = None

    def path(self, age: int = 0) -> Path:
        return self.folder / f"{BASE}{self.tag}{f'.{age}' if age else ''}{SUFFIX}"

    def _open(self) -> gzip.GzipFile:
        self.opened = True
        self._raw = open(self.path(), "wb")  # noqa: SIM115 (kept open across flushes, closed in close())
        self._gzip = gzip.GzipFile(fileobj=self._raw, mode="wb", compresslevel=1)
        return self._gzip

    def write(self, lines: Sequence[bytes]) -> None:
        (self._gzip or self._open()).write(b"".join(lines))
        self.part_rows[0] += len(lines)
        if self._raw.tell() >= self.rotate_bytes:
            self.rotate()

    def rotate(self) -> None:
        """The current part becomes `.1` (older parts shift), the oldest beyond `max_parts` goes."""
        self._close_part()
        while len(self.part_rows) >= self.max_parts:
            age = len(self.part_rows) - 1
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path(age))
            self.dropped += self.part_rows.pop()
        for age in range(len(self.part_rows) - 1, -1, -1):
            os.replace(self.path(age), self.path(age + 1))
        self.part_rows.insert(0, 0)
        self._open()  # requests.jsonl.gz is always the newest part

    def flush(self) -> None:
        if self._gzip is not None:
            self._gzip.flush()

    def _close_part(self) -> None:
        if self._gzip is not None:
            self._gzip.close()
            self._raw.close()
            self._gzip = self._raw = None

    def close(self) -> None:
        self._close_part()

    @property
    def rows(self) -> int:
        return sum(self.part_rows)

    @property
    def files(self) -> int:
        return len(self.part_rows) if self.opened else 0


class RequestLog:
    """One Locust process's request rows: the `request` listener, the writer greenlet, the counts."""

    def __init__(self, folder: Path, worker: int = 0, tag: str = "", *, max_pending: int = MAX_PENDING,
                 writer: RotatingGzip | None = None):
        self.worker = worker
        self.writer = writer or RotatingGzip(folder, tag)
        self.max_pending = max_pending
        self.pending: list[Row] = []
        self.dropped = 0
        self.accounted = False
        """The LLM token accounting completes each row (set by `record.llm.token_accounting`)."""
        self._last: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._greenlet: Any = None
        self.on_counts: Any = None
        """Called with `counts()` after each write (the recorder's summary.json entry)."""

    # -- the request path ----------------------------------------------------------------------
    def on_request(self, request_type: str, name: str, response_time: float, response_length: int,
                   exception: BaseException | None = None, context: dict | None = None,
                   start_time: float | None = None, **_kw: object) -> None:
        if not is_invocation(request_type, name):
            return
        if len(self.pending) >= self.max_pending:
            self.dropped += 1
            return
        error = None if exception is None else _error_text(exception)
        ttft = gaps = None
        if context:
            ttft, gaps = context.get("ttft_ms"), context.get("inter_chunk_ms")
        row = Row(start_time or 0.0, request_type, name, response_time, response_length, error, ttft, gaps,
                  self.accounted)
        self.pending.append(row)
        if self.accounted:
            self._last[getcurrent()] = row

    def complete(self, sample: Any, turn: int | None = None) -> None:
        """The token accounting's figures (`llm.tokens.RequestTokens`, or None) for the calling greenlet's
        last request; `turn`: its turn in a `--turns` conversation."""
        row = self._last.pop(getcurrent(), None)
        if row is None:
            return
        row.awaiting = False
        row.turn = turn
        if sample is not None:
            row.input_tokens, row.output_tokens = sample.input_tokens, sample.output_tokens
            if sample.ttft_ms is not None:
                row.ttft_ms = sample.ttft_ms
            if sample.itl_ms:
                row.itl = sample.itl_ms

    # -- writing ---------------------------------------------------------------------------------
    def write_pending(self, final: bool = False) -> None:
        """Write the rows that are complete (a row still waiting for its tokens waits one more round)."""
        if not self.pending:
            return
        ready, waiting = [], []
        for row in self.pending:
            if row.awaiting and not final:
                row.awaiting = False  # written next time, complete or not
                waiting.append(row)
            else:
                ready.append(row)
        self.pending = waiting
        if ready:
            dumps, worker = orjson.dumps, self.worker
            try:
                self.writer.write([dumps(row.as_dict(worker), option=orjson.OPT_APPEND_NEWLINE) for row in ready])
            except OSError as exc:  # a full disk: the rows are lost, counted, and the run goes on
                self.dropped += len(ready)
                log.error("sm-locust: could not write %s (%s); %d rows dropped", self.writer.path(), exc, len(ready))
        if self.on_counts is not None:
            self.on_counts(self.counts())

    def write_all(self) -> None:
        """Every row so far, on disk (the test stopped: summary.json then counts them all)."""
        self.write_pending(final=True)
        self.writer.flush()

    def counts(self) -> dict:
        return {"rows": self.writer.rows, "dropped": self.dropped + self.writer.dropped, "files": self.writer.files,
                "file": self.writer.path().name}

    def _write_forever(self) -> None:
        while True:
            gevent.sleep(FLUSH_S)
            self.write_pending()
            self.writer.flush()

    def start(self, environment: Environment) -> None:
        environment.events.request.add_listener(self.on_request)
        self._greenlet = gevent.spawn(self._write_forever)

    def close(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None
        self.write_pending(final=True)
        self.writer.close()


def request_log_of(environment: object) -> RequestLog | None:
    return getattr(environment, ATTRIBUTE, None)


def attach_request_log(environment: Environment, folder: str | Path, worker: int | None = None) -> RequestLog:
    """Start this process's request log in `folder` (`worker`: a worker's index, its own file); closed
    and its last rows written when the process quits."""
    tag = "" if worker is None else f".w{worker}"
    request_log = RequestLog(Path(folder), worker or 0, tag)
    setattr(environment, ATTRIBUTE, request_log)
    request_log.start(environment)
    environment.events.test_stop.add_listener(lambda **_kw: request_log.write_all())
    environment.events.quitting.add_listener(lambda **_kw: request_log.close())
    return request_log
