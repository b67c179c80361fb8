"""Prompt datasets with mapped columns (sm_locust.payloads.datasets): CSV and Parquet streamed, JSONL's
keys mapped alike, a chat column under the messages template, the seeded bounded sample, bad
input as one line, and what the local endpoint receives of a mapped CSV."""

from __future__ import annotations

import csv
import json

import orjson
import pytest

import sm_locust.payloads.datasets as datasets
from sm_locust.cli import main
from sm_locust.endpoint.llm import LlmConfig
from sm_locust.errors import UsageError
from sm_locust.llm.tokens import estimate_tokens
from sm_locust.payloads.datasets import Columns
from sm_locust.payloads.llm import INPUT_TOKENS, LlmSettings, build_pool
from tests.conftest import run_cli

QUESTIONS = [("What is prefix caching?", 17), ("Name three rivers, briefly.", 5), ("Why, \"exactly\"?", 230),
             ("Summarise: a, b; c.", 64)]


def write_csv(path, header, rows):
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    return str(path)


def asked(pool, template="tgi"):
    bodies = [orjson.loads(i.body) for i in pool.invocations]
    if template == "tgi":
        return [(b["inputs"], b["parameters"].get("max_new_tokens")) for b in bodies]
    return [(b["messages"], b.get("max_tokens")) for b in bodies]


def test_csv_with_mapped_columns_asks_the_datasets_answer_lengths(tmp_path):
    path = write_csv(tmp_path / "d.csv", ["id", "question", "answer_len"],
                     [[n, q, length] for n, (q, length) in enumerate(QUESTIONS)])
    settings = LlmSettings(path, "tgi", 999, columns=Columns("question", "answer_len")).check()
    pool = build_pool(settings, stream=True)
    assert asked(pool) == QUESTIONS
    assert [i.extra[INPUT_TOKENS] for i in pool.invocations] == [5, 6, 6, 8]


def test_csv_default_columns_and_a_row_without_its_length(tmp_path):
    path = write_csv(tmp_path / "d.csv", ["prompt", "output_tokens"], [["one two", "8"], ["three", ""]])
    assert asked(build_pool(LlmSettings(path, "tgi", 32).check(), stream=False)) == [("one two", 8), ("three", 32)]


def test_parquet_with_a_chat_column(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    chats = [[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
             [{"role": "user", "content": "Count to three"}]]
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"conversation": chats, "n": [12, 40]}), path, row_group_size=1)
    settings = LlmSettings(str(path), "messages", columns=Columns("conversation", "n")).check()
    assert asked(build_pool(settings, stream=False), "messages") == [(chats[0], 12), (chats[1], 40)]
    with pytest.raises(UsageError, match="holds \"messages\" .* pass --llm-template messages"):
        build_pool(LlmSettings(str(path), "tgi", columns=Columns("conversation")).check(), stream=False)


def test_csv_chat_cells_as_json(tmp_path):
    chat = [{"role": "user", "content": "Hi"}]
    path = write_csv(tmp_path / "d.csv", ["messages"], [[json.dumps(chat)]])
    assert asked(build_pool(LlmSettings(path, "messages").check(), stream=False), "messages") == [(chat, None)]


def test_jsonl_keys_mapped_too(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(json.dumps({"q": q, "len": n, "max_new_tokens": 1}) for q, n in QUESTIONS) + "\n")
    pool = build_pool(LlmSettings(str(path), "tgi", columns=Columns("q", "len")).check(), stream=False)
    assert asked(pool) == QUESTIONS


def test_a_large_dataset_is_a_seeded_bounded_sample(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets, "MAX_PROMPTS", 10)
    path = write_csv(tmp_path / "d.csv", ["prompt", "n"], [[f"row {i}", i + 1] for i in range(200)])
    settings = LlmSettings(path, "tgi", columns=Columns(output_tokens="n")).check()
    first = [n for _, n in asked(build_pool(settings, stream=False, seed=1))]
    again = [n for _, n in asked(build_pool(settings, stream=False, seed=1))]
    other = [n for _, n in asked(build_pool(settings, stream=False, seed=2))]
    assert len(first) == 10 and first == again and first == sorted(first) and first != other
    assert max(first) > 10  # rows past the bound were sampled


@pytest.mark.parametrize("header, rows, columns, needle", [
    (["prompt"], [["hi"]], Columns("question"), "no column 'question' (--prompt-column); the dataset has 'prompt'"),
    (["prompt"], [["hi"]], Columns("", "n"), "no column 'n' (--output-tokens-column)"),
    (["prompt", "n"], [["hi", "many"]], Columns("", "n"), "d.csv:2: max_new_tokens must be a whole number"),
    (["prompt"], [[""]], Columns(), "d.csv:2: no prompt"),
    (["prompt"], [], Columns(), "holds no rows"),
])
def test_bad_datasets_name_the_row(header, rows, columns, needle, tmp_path):
    path = write_csv(tmp_path / "d.csv", header, rows)
    with pytest.raises(UsageError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        build_pool(LlmSettings(path, "tgi", columns=columns).check(), stream=False)


@pytest.mark.parametrize("argv, needle", [
    (["--prompts", "synthetic:8", "--prompt-column", "q"], "--prompt-column maps a dataset's columns"),
    (["--payload", "x.json", "--output-tokens-column", "n"], "--output-tokens-column shapes LLM requests"),
    (["--prompts", "{d}/missing.csv"], "no such file"),
])
def test_column_options_bad_input_is_one_line_exit_2(argv, needle, tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["run", "--endpoint-name", "ep", "--endpoint-url", "http://127.0.0.1:9", "--out", str(out),
                 *[a.format(d=tmp_path) for a in argv]])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and needle in lines[0], lines
    assert not out.exists()


@pytest.mark.e2e
def test_the_endpoint_is_asked_the_datasets_answer_lengths(endpoint_factory, tmp_path):
    """A CSV with mapped columns against `serve --llm` counting what it receives: each request asks its
    row's answer length (never --max-new-tokens'), and every row is asked."""
    path = write_csv(tmp_path / "d.csv", ["id", "question", "answer_len"],
                     [[n, q, length] for n, (q, length) in enumerate(QUESTIONS)])
    log = tmp_path / "received.jsonl"
    ep = endpoint_factory(llm=LlmConfig(max_sequences=16, step_ms=2.0, step_ms_per_seq=0.1, prefill_ms_per_token=0.0,
                                        request_log=str(log)))
    result = run_cli("run", "--endpoint-name", "llm", "--endpoint-url", ep.url, "--prompts", path, "--prompt-column",
                     "question", "--output-tokens-column", "answer_len", "--max-new-tokens", "999", "--stream", "true",
                     "-u", "4", "-t", "4s", "--out", str(tmp_path / "run"), timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    received = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    asked = [(line["prompt_tokens"], line["max_new_tokens"]) for line in received if "prompt_tokens" in line]
    rows = {(estimate_tokens(q), length) for q, length in QUESTIONS}
    assert len(asked) >= len(QUESTIONS) and set(asked) == rows  # every row, each with its own length
