"""`--prompts DIR`: a folder Hugging Face `datasets`' `Dataset.save_to_disk` wrote (sm_locust.payloads.datasets),
read with pyarrow (the `datasets` package is not needed): its Arrow stream files in `state.json`'s order,
columns mapped as for CSV and Parquet, a DatasetDict's one split, bad folders as one line, and what the
local endpoint is asked. The folders are written here as save_to_disk writes them (docs/facts.md, "Hugging
Face datasets folders"): `data-0000N-of-0000M.arrow` IPC streams whose schema carries the `huggingface`
features metadata, `state.json` (indent 2, sorted keys) and `dataset_info.json`."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from sm_locust.cli import main
from sm_locust.endpoint.llm import LlmConfig
from sm_locust.errors import UsageError
from sm_locust.payloads.datasets import Columns
from sm_locust.payloads.llm import LlmSettings, build_pool
from tests.conftest import run_cli

pa = pytest.importorskip("pyarrow")

QUESTIONS = [("What is prefix caching?", 17), ("Name three rivers, briefly.", 5), ("Why, \"exactly\"?", 230),
             ("Summarise: a, b; c.", 64), ("One more row", 9)]
STRING = {"dtype": "string", "_type": "Value"}
INT64 = {"dtype": "int64", "_type": "Value"}


def save_to_disk(folder: Path, columns: dict[str, list], features: dict, shards: int = 1, batch_rows: int = 2) -> Path:
    """The files `Dataset.save_to_disk(folder, num_shards=shards)` writes: contiguous shards, each an Arrow IPC
    stream (datasets' ArrowWriter: a RecordBatchStreamWriter, batches of at most `batch_rows`)."""
    folder.mkdir(parents=True)
    table = pa.table(columns)
    metadata = {"huggingface": json.dumps({"info": {"features": features}})}
    table = table.replace_schema_metadata(metadata)
    per_shard = -(-table.num_rows // shards)
    names = [f"data-{i:05d}-of-{shards:05d}.arrow" for i in range(shards)]
    for i, name in enumerate(names):
        with pa.OSFile(str(folder / name), "wb") as sink, pa.RecordBatchStreamWriter(sink, table.schema) as writer:
            writer.write_table(table.slice(i * per_shard, per_shard), max_chunksize=batch_rows)
    state = {"_data_files": [{"filename": name} for name in names], "_fingerprint": "0123456789abcdef",
             "_format_columns": None, "_format_kwargs": {}, "_format_type": None, "_output_all_columns": False,
             "_split": "train"}
    (folder / "state.json").write_text(json.dumps(state, indent=2, sort_keys=True))
    info = {"builder_name": None, "citation": "", "config_name": None, "dataset_name": None, "dataset_size": None,
            "description": "", "download_checksums": None, "download_size": None, "features": features,
            "homepage": "", "license": "", "post_processed": None, "post_processing_size": None,
            "size_in_bytes": None, "splits": None, "supervised_keys": None, "version": None}
    (folder / "dataset_info.json").write_text(json.dumps(info, indent=2))
    return folder


def questions_folder(tmp_path: Path, shards: int = 2) -> Path:
    return save_to_disk(tmp_path / "questions", {"id": list(range(len(QUESTIONS))),
                                                  "question": [q for q, _ in QUESTIONS],
                                                  "answer_len": [n for _, n in QUESTIONS]},
                        {"id": INT64, "question": STRING, "answer_len": INT64}, shards=shards)


def asked(pool, template="tgi"):
    bodies = [orjson.loads(i.body) for i in pool.invocations]
    if template == "tgi":
        return [(b["inputs"], b["parameters"].get("max_new_tokens")) for b in bodies]
    return [(b["messages"], b.get("max_tokens")) for b in bodies]


def test_a_saved_dataset_with_mapped_columns_asks_its_answer_lengths(tmp_path):
    folder = questions_folder(tmp_path, shards=2)  # 2 files of 3 and 2 rows, in batches of 2
    settings = LlmSettings(str(folder), "tgi", 999, columns=Columns("question", "answer_len")).check()
    assert asked(build_pool(settings, stream=True)) == QUESTIONS  # every row, in state.json's file order
    # the state's order, not the names': the files listed the other way round are read the other way round
    state = json.loads((folder / "state.json").read_text())
    state["_data_files"].reverse()
    (folder / "state.json").write_text(json.dumps(state))
    assert asked(build_pool(settings, stream=True)) == QUESTIONS[3:] + QUESTIONS[:3]


def test_default_columns_and_a_chat_column(tmp_path):
    chats = [[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
             [{"role": "user", "content": "Count to three"}]]
    message = [{"content": STRING, "role": STRING}]  # datasets' features of a list of {"content", "role"}
    folder = save_to_disk(tmp_path / "chats", {"messages": chats, "max_new_tokens": [12, 40]},
                          {"messages": message, "max_new_tokens": INT64})
    pool = build_pool(LlmSettings(str(folder), "messages").check(), stream=False)
    assert asked(pool, "messages") == [(chats[0], 12), (chats[1], 40)]
    with pytest.raises(UsageError, match="holds \"messages\" .* pass --llm-template messages"):
        build_pool(LlmSettings(str(folder), "tgi").check(), stream=False)


def test_a_dataset_dicts_one_split_is_read_and_several_are_named(tmp_path):
    root = tmp_path / "dict"
    save_to_disk(root / "train", {"prompt": ["a b", "c"]}, {"prompt": STRING})
    (root / "dataset_dict.json").write_text(json.dumps({"splits": ["train"]}))
    assert asked(build_pool(LlmSettings(str(root), "tgi", 4).check(), stream=False)) == [("a b", 4), ("c", 4)]
    save_to_disk(root / "test", {"prompt": ["d"]}, {"prompt": STRING})
    (root / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "test"]}))
    with pytest.raises(UsageError, match="holds the splits of a DatasetDict; pass one split's folder: .*train.*test"):
        build_pool(LlmSettings(str(root), "tgi").check(), stream=False)


def _no_state(folder: Path) -> None:
    (folder / "state.json").unlink()


def _escaping_name(folder: Path) -> None:
    (folder.parent / "outside.arrow").write_bytes((folder / "data-00000-of-00001.arrow").read_bytes())
    (folder / "state.json").write_text(json.dumps({"_data_files": [{"filename": "../outside.arrow"}]}))


def _missing_file(folder: Path) -> None:
    (folder / "data-00000-of-00001.arrow").unlink()


def _not_arrow(folder: Path) -> None:
    (folder / "data-00000-of-00001.arrow").write_bytes(b"PAR1 not an arrow stream")


def _not_json(folder: Path) -> None:
    (folder / "state.json").write_text("{")


def _no_files(folder: Path) -> None:
    (folder / "state.json").write_text(json.dumps({"_data_files": []}))


@pytest.mark.parametrize("spoil, needle", [
    (_no_state, "is a folder without state.json; pass a folder datasets' save_to_disk wrote"),
    (_escaping_name, "names a data file '../outside.arrow' that is not a file name in the folder"),
    (_missing_file, "no data file 'data-00000-of-00001.arrow', which state.json lists"),
    (_not_arrow, "questions/data-00000-of-00001.arrow: not an Arrow stream file"),
    (_not_json, "questions/state.json: not JSON"),
    (_no_files, "state.json lists no data files"),
])
def test_bad_folders_are_one_line(spoil, needle, tmp_path, capsys):
    folder = questions_folder(tmp_path, shards=1)
    spoil(folder)
    with pytest.raises(UsageError, match=needle.replace("(", r"\(").replace(".", r"\.")):
        build_pool(LlmSettings(str(folder), "tgi", columns=Columns("question")).check(), stream=False)
    out = tmp_path / "run"
    code = main(["run", "--endpoint-name", "ep", "--endpoint-url", "http://127.0.0.1:9", "--out", str(out),
                 "--prompts", str(folder), "--prompt-column", "question"])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and needle in lines[0], lines
    assert not out.exists()


def test_a_mapped_column_the_folder_lacks_lists_its_columns(tmp_path):
    folder = questions_folder(tmp_path)
    with pytest.raises(UsageError, match="no column 'prompt_text' .*the dataset has 'id', 'question', 'answer_len'"):
        build_pool(LlmSettings(str(folder), "tgi", columns=Columns("prompt_text")).check(), stream=False)


@pytest.mark.e2e
def test_the_endpoint_is_asked_the_saved_datasets_answer_lengths(endpoint_factory, tmp_path):
    """A saved dataset with mapped columns against `serve --llm` counting what it receives: each request asks its
    row's answer length (never --max-new-tokens'), and every row is asked."""
    folder = questions_folder(tmp_path)
    log = tmp_path / "received.jsonl"
    ep = endpoint_factory(llm=LlmConfig(max_sequences=16, step_ms=2.0, step_ms_per_seq=0.1, prefill_ms_per_token=0.0,
                                        request_log=str(log)))
    result = run_cli("run", "--endpoint-name", "llm", "--endpoint-url", ep.url, "--prompts", str(folder),
                     "--prompt-column", "question", "--output-tokens-column", "answer_len", "--max-new-tokens", "999",
                     "--stream", "true", "-u", "4", "-t", "4s", "--out", str(tmp_path / "run"), timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    received = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    lengths = [line["max_new_tokens"] for line in received if "prompt_tokens" in line]
    assert len(lengths) >= len(QUESTIONS) and set(lengths) == {n for _, n in QUESTIONS}
