"""Request traces in Mooncake's format (`--trace FILE`): when each request arrives, how long it is, what it shares.

One JSON object per line: `timestamp` (ms since the trace's start), `input_length` and `output_length`
(tokens), `hash_ids` (one id per 512-token block of the prompt; equal ids at the start of two prompts
mean a shared prefix). docs/facts.md, "Mooncake traces", has the format and its source.

`read_trace` reads a file into a `Trace` (rows in time order, bounded in rows and bytes; a bad line is
one UsageError naming it). `TracePrompts` writes a row's prompt: each hash id is one fixed block of
one-token words (seeded by the id, so equal ids give equal text), a partial last block is that block's
start, and tokens past the ids are the row's own. Pure: nothing here sends or sleeps.
"""

from __future__ import annotations

import collections
import math
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from sm_locust.errors import UsageError

BLOCK_TOKENS = 512
"""Tokens per hash id in Mooncake's traces (docs/facts.md)."""
MAX_TRACE_ROWS = 100_000
"""Rows read from a trace: Mooncake's largest published trace has 23,608."""
MAX_TRACE_BYTES = 256 << 20
MAX_OUTPUT_TOKENS = 1 << 20
KEYS = ("timestamp", "input_length", "output_length", "hash_ids")
BLOCK_CACHE = 4096
"""Block texts kept (a trace's shared prefixes come back; ~3 KB each)."""


@dataclass(frozen=True)
class TraceRow:
    """One traced request."""

    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...] = ()
    line: int = 0
    """Its line in the file (for messages)."""


@dataclass(frozen=True)
class Trace:
    """A trace's rows in time order (ties keep the file's order)."""

    rows: tuple[TraceRow, ...]
    source: str = ""

    @property
    def duration_s(self) -> float:
        """From the first request to the last, as traced."""
        return (self.rows[-1].timestamp_ms - self.rows[0].timestamp_ms) / 1000.0 if self.rows else 0.0

    def offsets_s(self, time_scale: float = 1.0) -> list[float]:
        """Each row's send time in seconds after the first row's, divided by `time_scale` (2 = twice as fast)."""
        if not self.rows:
            return []
        origin = self.rows[0].timestamp_ms
        return [(row.timestamp_ms - origin) / 1000.0 / time_scale for row in self.rows]

    def describe(self, time_scale: float = 1.0) -> dict:
        """summary.json's `trace` object: what was replayed."""
        inputs = [r.input_length for r in self.rows]
        outputs = [r.output_length for r in self.rows]
        blocks = collections.Counter(h for r in self.rows for h in r.hash_ids)
        return {"source": self.source, "requests": len(self.rows), "duration_s": round(self.duration_s, 3),
                "time_scale": time_scale, "input_tokens": sum(inputs), "output_tokens": sum(outputs),
                "blocks": sum(blocks.values()), "distinct_blocks": len(blocks)}


def read_trace(path: str | Path, max_rows: int = MAX_TRACE_ROWS, max_bytes: int = MAX_TRACE_BYTES) -> Trace:
    """The trace in the JSONL file `path`; a one-line UsageError for a missing, oversized or malformed file."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"--trace {str(path)!r}: no such file; give a Mooncake-format JSONL trace ({{\"timestamp\": "
                         "MS, \"input_length\": N, \"output_length\": N, \"hash_ids\": [...]} per line)")
    rows = [parse_row(raw, f"{path.name}:{number}", number)
            for number, raw in _lines(path, max_rows, max_bytes) if raw.strip()]
    if not rows:
        raise UsageError(f"--trace {str(path)!r} holds no requests; write one JSON object per line")
    rows.sort(key=lambda r: r.timestamp_ms)  # stable: equal times keep the file's order
    return Trace(tuple(rows), str(path))


def _lines(path: Path, max_rows: int, max_bytes: int) -> Iterator[tuple[int, bytes]]:
    total = rows = 0
    try:
        with open(path, "rb") as fh:
            number = 0
            while raw := fh.readline(max_bytes - total + 1):
                total += len(raw)
                number += 1
                if total > max_bytes:
                    raise UsageError(f"--trace {str(path)!r} is over {max_bytes >> 20} MB; replay a part of it "
                                     "(head -n N)")
                if raw.strip():
                    rows += 1
                    if rows > max_rows:
                        raise UsageError(f"--trace {str(path)!r} holds more than {max_rows:,} requests; replay a "
                                         "part of it (head -n N)")
                yield number, raw[3:] if number == 1 and raw.startswith(b"\xef\xbb\xbf") else raw
    except OSError as exc:
        raise UsageError(f"cannot read --trace file {str(path)!r}: {exc.strerror}") from None


def parse_row(raw: bytes, where: str, line: int = 0) -> TraceRow:
    """One trace line (`where` names it in errors)."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        doc = None
    if not isinstance(doc, dict):
        raise UsageError(f"{where}: not a JSON object; a Mooncake trace line is {{\"timestamp\": MS, "
                         "\"input_length\": N, \"output_length\": N, \"hash_ids\": [...]}")
    missing = [k for k in KEYS[:3] if k not in doc]
    if missing:
        raise UsageError(f"{where}: no {' or '.join(map(repr, missing))}; each line needs timestamp (ms), "
                         "input_length and output_length (tokens)")
    timestamp = doc["timestamp"]
    if isinstance(timestamp, bool) or not isinstance(timestamp, (int, float)) or not (
            math.isfinite(timestamp) and timestamp >= 0):
        raise UsageError(f"{where}: timestamp must be milliseconds >= 0, got {timestamp!r}")
    input_length = _tokens(doc["input_length"], "input_length", where)
    output_length = _tokens(doc["output_length"], "output_length", where)
    if output_length > MAX_OUTPUT_TOKENS:
        raise UsageError(f"{where}: output_length {output_length:,} is over {MAX_OUTPUT_TOKENS:,} tokens")
    hash_ids = doc.get("hash_ids") or []
    if not isinstance(hash_ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) and h >= 0
                                                  for h in hash_ids):
        raise UsageError(f"{where}: hash_ids must be a list of whole numbers >= 0, got {str(hash_ids)[:80]}")
    blocks = math.ceil(input_length / BLOCK_TOKENS)
    if len(hash_ids) > blocks:
        raise UsageError(f"{where}: {len(hash_ids)} hash_ids for input_length {input_length:,}: one id per "
                         f"{BLOCK_TOKENS}-token block makes at most {blocks}")
    return TraceRow(float(timestamp), input_length, output_length, tuple(hash_ids), line)


def _tokens(value: object, key: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{where}: {key} must be a whole number of tokens >= 1, got {value!r}")
    return value


class TracePrompts:
    """Prompts of a trace's rows: `prompt(row, index)` is `row.input_length` one-token words, its hash ids'
    blocks first. `count` (a tokenizer's) checks the length; a prompt it counts otherwise has its own tail
    trimmed or grown until it counts right (the shared blocks stay)."""

    def __init__(self, words: Sequence[str], seed: int = 0, count: Callable[[str], int] | None = None):
        if not words:
            raise ValueError("no words to write prompts with")
        self.words = list(words)
        self.seed = seed
        self.count = count
        self._blocks: collections.OrderedDict[int, list[str]] = collections.OrderedDict()

    def block(self, hash_id: int) -> list[str]:
        """The `BLOCK_TOKENS` words of one hash id (the same for the same id and seed)."""
        words = self._blocks.get(hash_id)
        if words is None:
            words = random.Random(f"{self.seed}:block:{hash_id}").choices(self.words, k=BLOCK_TOKENS)
            self._blocks[hash_id] = words
            if len(self._blocks) > BLOCK_CACHE:
                self._blocks.popitem(last=False)
        else:
            self._blocks.move_to_end(hash_id)
        return words

    def prompt_words(self, row: TraceRow, index: int) -> list[str]:
        words: list[str] = []
        for hash_id in row.hash_ids:
            words.extend(self.block(hash_id))
        del words[row.input_length:]
        if len(words) < row.input_length:
            rng = random.Random(f"{self.seed}:row:{index}")
            words.extend(rng.choices(self.words, k=row.input_length - len(words)))
        return words

    def prompt(self, row: TraceRow, index: int) -> str:
        words = self.prompt_words(row, index)
        text = " ".join(words)
        if self.count is None:
            return text
        have = self.count(text)
        if have == row.input_length:
            return text
        shared = min(len(words), BLOCK_TOKENS * max(0, len(row.hash_ids) - 1))  # the full blocks stay as they are
        rng = random.Random(f"{self.seed}:fix:{index}")
        tail = words[shared:]
        for _ in range(64):
            if have < row.input_length:
                tail.extend(rng.choices(self.words, k=row.input_length - have))
            elif tail:
                del tail[max(0, len(tail) - (have - row.input_length)):]
            else:
                break
            text = " ".join(words[:shared] + tail)
            have = self.count(text)
            if have == row.input_length:
                return text
        raise UsageError(f"trace line {row.line}: cannot write a prompt of exactly {row.input_length} tokens with "
                         "this tokenizer (its words merge across spaces)")

    def longest_body_bytes(self, row: TraceRow) -> int:
        """An upper bound of the prompt's size in bytes (UTF-8), for the body limit."""
        return row.input_length * (max(len(w.encode()) for w in self.words) + 1)


def lateness(lags_s: Sequence[float]) -> dict:
    """How late the sends left (ms): p50, p95 (nearest rank) and max; empty when nothing was sent."""
    if not lags_s:
        return {}
    ordered = sorted(lags_s)

    def rank(p: float) -> float:
        return round(ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)] * 1000.0, 3)

    return {"p50": rank(50), "p95": rank(95), "max": round(ordered[-1] * 1000.0, 3)}
