"""Prompt datasets as tables: CSV and Parquet files read row by row, with their columns mapped.

`--prompt-column` names the prompt's column (default `prompt`, else `messages`), and
`--output-tokens-column` the answer length (default the first of `max_new_tokens`, `output_tokens`,
`expected_output_tokens`). The file is streamed, never read whole: at most `MAX_PROMPTS` rows are
kept, a seeded reservoir sample of the rest (`--payload-seed`); a prompt over SageMaker's 6 MB body
is refused, naming its row. JSONL prompts are `payloads/llm.py`'s.
"""

from __future__ import annotations

import csv
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from sm_locust.aws.runtime_api import MAX_BODY_BYTES
from sm_locust.errors import UsageError

CSV_SUFFIXES = (".csv",)
PARQUET_SUFFIXES = (".parquet", ".pq")
MAX_PROMPTS = 100_000
"""Rows kept from a dataset (a seeded sample beyond): enough for any test's variety, bounded in memory."""
PARQUET_BATCH_ROWS = 1024
PROMPT_KEYS = ("prompt", "messages")
LENGTH_KEYS = ("max_new_tokens", "output_tokens", "expected_output_tokens")


@dataclass(frozen=True)
class Columns:
    """The dataset's column names for the prompt and the answer length ("" = the default names)."""

    prompt: str = ""
    output_tokens: str = ""

    @property
    def given(self) -> bool:
        return bool(self.prompt or self.output_tokens)


DEFAULT_COLUMNS = Columns()


def is_table(path: str | Path) -> bool:
    """A dataset read by this module (by its suffix), not a JSONL file."""
    return Path(path).suffix.lower() in CSV_SUFFIXES + PARQUET_SUFFIXES


def mapped(row: dict, columns: Columns, where: str, names: Sequence[str]) -> dict:
    """The row as a prompt line (`{"prompt" | "messages": ..., "max_new_tokens": ...}`), its columns
    mapped; a named column the dataset lacks is a one-line UsageError listing the ones it has."""
    line: dict[str, object] = {}
    if columns.prompt:
        if columns.prompt not in row:
            raise UsageError(f"{where}: no column {columns.prompt!r} (--prompt-column); the dataset has "
                             f"{', '.join(map(repr, names[:20]))}")
        value = row[columns.prompt]
        line["messages" if _is_chat(value) else "prompt"] = _chat(value) if _is_chat(value) else value
    else:
        line.update({k: row[k] for k in PROMPT_KEYS if k in row})
        if isinstance(line.get("messages"), str) and _is_chat(line["messages"]):
            line["messages"] = _chat(line["messages"])
    if columns.output_tokens:
        if columns.output_tokens not in row:
            raise UsageError(f"{where}: no column {columns.output_tokens!r} (--output-tokens-column); the dataset "
                             f"has {', '.join(map(repr, names[:20]))}")
        line["max_new_tokens"] = _whole(row[columns.output_tokens])
    else:
        line.update({k: _whole(row[k]) for k in LENGTH_KEYS if k in row})
    return line


def _is_chat(value: object) -> bool:
    if isinstance(value, list):
        return True
    return isinstance(value, str) and value.lstrip().startswith("[{")


def _chat(value: object) -> object:
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def _whole(value: object) -> object:
    """A CSV cell's number as an int ("" = none); other types pass through to be checked."""
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        return int(text) if text.isdigit() else value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def read_table(path: str | Path, seed: int = 0) -> Iterator[tuple[str, dict, list[str]]]:
    """(where, row, column names) per row kept: all of them up to MAX_PROMPTS, else a seeded sample of
    MAX_PROMPTS in file order."""
    kept: list[tuple[int, tuple[str, dict, list[str]]]] = []
    rng = random.Random(seed)
    for number, item in enumerate(_rows(Path(path))):
        if number < MAX_PROMPTS:
            kept.append((number, item))
        else:
            slot = rng.randint(0, number)
            if slot < MAX_PROMPTS:
                kept[slot] = (number, item)
    kept.sort(key=lambda pair: pair[0])
    for _, item in kept:
        yield item


def _rows(path: Path) -> Iterator[tuple[str, dict, list[str]]]:
    if not path.is_file():
        raise UsageError(f"--prompts {str(path)!r}: no such file (a JSONL, CSV or Parquet dataset, or "
                         "synthetic:LENGTH)")
    if path.suffix.lower() in CSV_SUFFIXES:
        yield from _csv_rows(path)
    else:
        yield from _parquet_rows(path)


def _csv_rows(path: Path) -> Iterator[tuple[str, dict, list[str]]]:
    limit = csv.field_size_limit(MAX_BODY_BYTES)  # a prompt cell larger than a request body cannot be sent
    try:
        with open(path, encoding="utf-8-sig", newline="") as fh:
            reader = csv.DictReader(fh)
            names = list(reader.fieldnames or [])
            for row in reader:
                yield f"{path.name}:{reader.line_num}", row, names
    except csv.Error as exc:
        raise UsageError(f"{path.name}: not a readable CSV ({exc}); a header row, then one prompt per row") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path.name}: not UTF-8 text; save the CSV as UTF-8") from None
    finally:
        csv.field_size_limit(limit)


def _parquet_rows(path: Path) -> Iterator[tuple[str, dict, list[str]]]:
    try:
        import pyarrow.parquet as pq  # lazy: pyarrow is heavy and only Parquet datasets need it here
    except ImportError:
        raise UsageError("--prompts FILE.parquet needs pyarrow: pip install pyarrow") from None
    try:
        table = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises ArrowInvalid and OSError subclasses for a bad file
        raise UsageError(f"{path.name}: not a readable Parquet file ({str(exc).splitlines()[0][:200]})") from None
    names = list(table.schema_arrow.names)
    number = 0
    for batch in table.iter_batches(batch_size=PARQUET_BATCH_ROWS):
        for row in batch.to_pylist():
            number += 1
            yield f"{path.name}:row {number}", row, names
