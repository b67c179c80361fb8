"""A --prompts file is read a line at a time and bounded (payloads/llm.py `MAX_PROMPTS`, `MAX_PROMPTS_BYTES`);
a prompt whose request body is over SageMaker's 6 MB limit is refused before the test."""

from __future__ import annotations

import json

import pytest

from sm_locust.aws.runtime_api import MAX_BODY_BYTES
from sm_locust.errors import UsageError
from sm_locust.payloads import llm
from sm_locust.payloads.llm import LlmSettings, build_pool, read_prompts


def write(path, count: int, text: str = "hi") -> str:
    path.write_text("".join(json.dumps({"prompt": f"{text} {i}"}) + "\n" for i in range(count)))
    return str(path)


def test_prompts_at_the_bound_are_read_and_one_more_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(llm, "MAX_PROMPTS", 50)
    assert len(read_prompts(write(tmp_path / "at.jsonl", 50), "tgi")) == 50
    with pytest.raises(UsageError, match=r"past.jsonl' holds more than 50 prompts"):
        read_prompts(write(tmp_path / "past.jsonl", 51), "tgi")


def test_bytes_at_the_bound_are_read_and_one_more_is_refused(tmp_path, monkeypatch):
    path = write(tmp_path / "p.jsonl", 20)
    size = (tmp_path / "p.jsonl").stat().st_size
    monkeypatch.setattr(llm, "MAX_PROMPTS_BYTES", size)
    assert len(read_prompts(path, "tgi")) == 20
    monkeypatch.setattr(llm, "MAX_PROMPTS_BYTES", size - 1)
    with pytest.raises(UsageError, match=r"p.jsonl' is over 0 MB; keep a sample"):
        read_prompts(path, "tgi")


def test_one_endless_line_is_not_read_past_the_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(llm, "MAX_PROMPTS_BYTES", 1 << 16)
    (tmp_path / "long.jsonl").write_bytes(b'{"prompt": "' + b"x" * (1 << 20))
    with pytest.raises(UsageError, match="is over"):
        read_prompts(str(tmp_path / "long.jsonl"), "tgi")


def test_blank_lines_do_not_count_as_prompts(tmp_path, monkeypatch):
    monkeypatch.setattr(llm, "MAX_PROMPTS", 2)
    (tmp_path / "b.jsonl").write_text('{"prompt": "a"}\n\n\n\n{"prompt": "b"}\n\n')
    assert [p for p, _ in read_prompts(str(tmp_path / "b.jsonl"), "tgi")] == ["a", "b"]


def test_a_prompt_over_the_body_limit_is_refused_before_the_test(tmp_path):
    words = MAX_BODY_BYTES // 5
    at = tmp_path / "at.jsonl"
    at.write_text(json.dumps({"prompt": "word " * (words - 100)}) + "\n")
    assert len(build_pool(LlmSettings(str(at), "tgi", 16).check(), stream=True).invocations) == 1
    big = tmp_path / "big.jsonl"
    big.write_text(json.dumps({"prompt": "ok"}) + "\n" + json.dumps({"prompt": "x" * 7_000_000}) + "\n")
    with pytest.raises(UsageError, match=r"prompt 2 makes a request body of 7,0\d\d,\d\d\d bytes, over 6,291,456"):
        build_pool(LlmSettings(str(big), "tgi", 16).check(), stream=True)
