"""Prompt datasets as tables: CSV and Parquet files, and Hugging Face `datasets` folders, read row by row,
with their columns mapped.

`--prompt-column` names the prompt's column (default `prompt`, else `messages`), and
`--output-tokens-column` the answer length (default the first of `max_new_tokens`, `output_tokens`,
`expected_output_tokens`). The file is streamed, never read whole: at most `MAX_PROMPTS` rows are
kept, a seeded reservoir sample of the rest (`--payload-seed`); a prompt over SageMaker's 6 MB body
is refused, naming its row. A folder is one `Dataset.save_to_disk` wrote (docs/facts.md, "Hugging Face
datasets folders"): `state.json` names its Arrow IPC stream files, read with pyarrow batch by batch, so
the `datasets` package is not needed. JSONL prompts are `payloads/llm.py`'s.
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
STATE_JSON = "state.json"
"""A saved `Dataset`'s state: `_data_files` lists its Arrow files, in order."""
DATASET_INFO_JSON = "dataset_info.json"
DATASET_DICT_JSON = "dataset_dict.json"
"""A saved `DatasetDict`: `splits` lists its splits, each a saved `Dataset` in a subfolder."""
MAX_STATE_BYTES = 1 << 20
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
    """A dataset read by this module (a CSV or Parquet file by its suffix, or a folder), not a JSONL file."""
    return Path(path).suffix.lower() in CSV_SUFFIXES + PARQUET_SUFFIXES or Path(path).is_dir()


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
    if path.is_dir():
        yield from _saved_dataset_rows(path)
        return
    if not path.is_file():
        raise UsageError(f"--prompts {str(path)!r}: no such file (a JSONL, CSV or Parquet dataset, a datasets "
                         "folder, or synthetic:LENGTH)")
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


def _saved_dataset_rows(folder: Path) -> Iterator[tuple[str, dict, list[str]]]:
    """The rows of a folder `Dataset.save_to_disk` wrote: each Arrow stream file `state.json` lists, batch by
    batch; a `DatasetDict`'s folder of one split is that split."""
    folder = _one_split(folder)
    state = _json_file(folder / STATE_JSON, folder)
    files = state.get("_data_files") if isinstance(state, dict) else None
    if not isinstance(files, list) or not files or not all(isinstance(f, dict) for f in files):
        raise UsageError(f"--prompts {str(folder)!r}: {STATE_JSON} lists no data files (\"_data_files\"); save the "
                         "dataset again with save_to_disk")
    try:
        import pyarrow as pa  # lazy: pyarrow is heavy and only these datasets need it here
    except ImportError:
        raise UsageError("--prompts DIR (a datasets folder) needs pyarrow: pip install pyarrow") from None
    number = 0
    for entry in files:
        name = entry.get("filename")
        if not isinstance(name, str) or not name or name != Path(name).name or name in (".", ".."):
            raise UsageError(f"--prompts {str(folder)!r}: {STATE_JSON} names a data file {str(name)[:80]!r} that is "
                             "not a file name in the folder")
        path = folder / name
        if not path.is_file():
            raise UsageError(f"--prompts {str(folder)!r}: no data file {name!r}, which {STATE_JSON} lists; copy the "
                             "whole folder save_to_disk wrote")
        try:
            with pa.memory_map(str(path)) as source:
                reader = pa.ipc.open_stream(source)
                names = list(reader.schema.names)
                for batch in reader:
                    for row in batch.to_pylist():
                        number += 1
                        yield f"{folder.name}/{name}:row {number}", row, names
        except pa.ArrowException as exc:
            raise UsageError(f"{folder.name}/{name}: not an Arrow stream file ({str(exc).splitlines()[0][:200]}); "
                             "save the dataset again with save_to_disk") from None
        except OSError as exc:
            raise UsageError(f"cannot read {folder.name}/{name}: {exc.strerror or exc}") from None


def _one_split(folder: Path) -> Path:
    """`folder` when it holds a saved Dataset; a DatasetDict's only split; else a one-line UsageError."""
    if (folder / STATE_JSON).is_file():
        return folder
    if (folder / DATASET_DICT_JSON).is_file():
        doc = _json_file(folder / DATASET_DICT_JSON, folder)
        splits = doc.get("splits") if isinstance(doc, dict) else None
        names = [s for s in splits if isinstance(s, str)] if isinstance(splits, list) else []
        if len(names) == 1 and (folder / names[0] / STATE_JSON).is_file() and names[0] == Path(names[0]).name:
            return folder / names[0]
        listed = ", ".join(f"{str(folder / n)!r}" for n in names[:10]) or "none listed"
        raise UsageError(f"--prompts {str(folder)!r} holds the splits of a DatasetDict; pass one split's folder: "
                         f"{listed}")
    raise UsageError(f"--prompts {str(folder)!r} is a folder without {STATE_JSON}; pass a folder datasets' "
                     f"save_to_disk wrote ({STATE_JSON}, {DATASET_INFO_JSON}, data-*.arrow), or a JSONL, CSV or "
                     "Parquet file")


def _json_file(path: Path, folder: Path) -> object:
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_STATE_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read {folder.name}/{path.name}: {exc.strerror}") from None
    if len(raw) > MAX_STATE_BYTES:
        raise UsageError(f"{folder.name}/{path.name} is over {MAX_STATE_BYTES >> 20} MB; it is not a datasets folder's")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise UsageError(f"{folder.name}/{path.name}: not JSON; save the dataset again with save_to_disk") from None
