"""LLM request templates (sm_locust.payloads.llm): TGI / messages bodies, prompt datasets and synthetic
prompts, the options, and bad input as one line with exit 2 before anything starts."""

from __future__ import annotations

import argparse
import json

import orjson
import pytest

from sm_locust.cli import main
from sm_locust.config.endpoint import SageMakerSettings
from sm_locust.config.options import all_option_specs, parse_options
from sm_locust.errors import UsageError
from sm_locust.llm.tokens import estimate_tokens
from sm_locust.payloads.llm import (
    INPUT_TOKENS,
    OPTIONS,
    LlmSettings,
    build_pool,
    request_body,
    synthetic_prompts,
)
from sm_locust.payloads.options import prepare_payloads


def test_bodies_for_each_template():
    assert request_body("tgi", "Hi", 64, stream=False) == {"inputs": "Hi",
                                                           "parameters": {"max_new_tokens": 64, "details": True}}
    assert request_body("tgi", "Hi", 0, stream=True) == {"inputs": "Hi", "parameters": {"details": True},
                                                         "stream": True}
    assert request_body("tgi", "Hi", 0, stream=True, details=False) == {"inputs": "Hi", "stream": True}
    assert request_body("tgi", "Hi", 8, stream=False, details=False) == {"inputs": "Hi",
                                                                         "parameters": {"max_new_tokens": 8}}
    assert request_body("messages", "Hi", 32, stream=True) == {
        "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 32, "stream": True,
        "stream_options": {"include_usage": True}}
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert request_body("messages", chat, 0, stream=False) == {"messages": chat}


def write(path, *lines):
    path.write_text("\n".join(json.dumps(line) if not isinstance(line, str) else line for line in lines) + "\n")
    return str(path)


def test_dataset_lines_with_and_without_their_own_length(tmp_path):
    prompts = write(tmp_path / "p.jsonl", {"prompt": "Tell me a story.", "max_new_tokens": 16}, {"prompt": "Why?"}, "",
                    {"prompt": "Go on", "expected_output_tokens": 8})
    pool = build_pool(LlmSettings(prompts, "tgi", 100).check(), stream=True)
    bodies = [orjson.loads(i.body) for i in pool.invocations]
    assert [b["parameters"]["max_new_tokens"] for b in bodies] == [16, 100, 8]
    assert all(b["stream"] is True for b in bodies) and len(pool) == 3
    assert [i.extra[INPUT_TOKENS] for i in pool.invocations] == [5, 2, 2]
    assert pool.invocations[0].content_type == "application/json"


def test_messages_template_takes_message_lines(tmp_path):
    prompts = write(tmp_path / "p.jsonl", {"messages": [{"role": "user", "content": "one two"}]}, {"prompt": "three"})
    pool = build_pool(LlmSettings(prompts, "openai", 0).check(), stream=False)
    first = orjson.loads(pool.invocations[0].body)
    assert first == {"messages": [{"role": "user", "content": "one two"}]}
    assert pool.invocations[0].extra[INPUT_TOKENS] == 2


def test_synthetic_prompts_have_the_asked_token_lengths():
    assert [estimate_tokens(p) for p, _ in synthetic_prompts("20", count=3)] == [20, 20, 20]
    lengths = [estimate_tokens(p) for p, _ in synthetic_prompts("10-30", count=50, seed=3)]
    assert min(lengths) >= 10 and max(lengths) <= 30 and len(set(lengths)) > 5
    assert synthetic_prompts("10-30", count=5, seed=3) == synthetic_prompts("10-30", count=5, seed=3)
    pool = build_pool(LlmSettings("synthetic:40", "messages", 16).check(), stream=True)
    assert len(pool) == 64 and {i.extra[INPUT_TOKENS] for i in pool.invocations} == {40}


BAD_LINES = {
    "not json": ("{prompt", "p.jsonl:1: not a JSON object"),
    "no prompt": ({"question": "hi"}, "p.jsonl:1: no prompt"),
    "empty prompt": ({"prompt": "  "}, "p.jsonl:1: no prompt"),
    "messages under tgi": ({"messages": [{"role": "user", "content": "x"}]},
                           "--llm-template is tgi; pass --llm-template messages"),
    "inputs under messages": ({"inputs": "x"}, "--llm-template is messages; pass --llm-template tgi"),
    "bad length": ({"prompt": "x", "max_new_tokens": 0}, "max_new_tokens must be a whole number"),
}


@pytest.mark.parametrize("case", list(BAD_LINES))
def test_bad_dataset_lines_name_the_line(case, tmp_path):
    line, needle = BAD_LINES[case]
    template = "messages" if case == "inputs under messages" else "tgi"
    prompts = write(tmp_path / "p.jsonl", line)
    with pytest.raises(UsageError, match=needle.replace("?", r"\?").replace("(", r"\(")):
        build_pool(LlmSettings(prompts, template).check(), stream=False)


def test_option_combinations():
    with pytest.raises(UsageError, match="--llm-template shapes LLM requests built from --prompts"):
        LlmSettings(template="tgi").check()
    with pytest.raises(UsageError, match="drop --payload"):
        LlmSettings("synthetic:5").check(payload="body.json")
    with pytest.raises(UsageError, match="unknown LLM template 'gpt'"):
        LlmSettings("synthetic:5", "gpt").check()
    with pytest.raises(UsageError, match="synthetic:abc"):
        build_pool(LlmSettings("synthetic:abc").check(), stream=False)
    assert LlmSettings("synthetic:5").check().template == "tgi"
    with pytest.raises(UsageError, match="--llm-details false shapes LLM requests built from --prompts"):
        LlmSettings(details=False).check()
    with pytest.raises(UsageError, match="the messages template asks for usage"):
        LlmSettings("synthetic:5", "messages", details=False).check()
    quiet = build_pool(LlmSettings("synthetic:5", details=False).check(), stream=True)
    assert "parameters" not in orjson.loads(quiet.next().body)
    assert orjson.loads(build_pool(LlmSettings("synthetic:5").check(), stream=True).next().body)["parameters"] == {
        "details": True}


def test_options_are_registered_and_prompts_stand_in_for_the_payload(tmp_path):
    flags = [spec.flag for spec in all_option_specs()]
    assert {s.flag for s in OPTIONS} <= set(flags) and len(flags) == len(set(flags))
    args = argparse.Namespace(endpoint_name="ep", prompts="synthetic:8", llm_template="messages", max_new_tokens=12,
                              stream=True, payload_seed=1)
    options = parse_options(vars(args))
    settings = SageMakerSettings.from_options(options).validate()
    prepared = prepare_payloads(settings, options)
    body = orjson.loads(prepared.pool.next().body)
    assert body["max_tokens"] == 12 and body["stream"] is True


@pytest.mark.parametrize("argv, needles", [
    (["--prompts", "{d}/missing.jsonl"], ["missing.jsonl", "no such file"]),
    (["--prompts", "{d}/bad.jsonl"], ["bad.jsonl:2: no prompt"]),
    (["--prompts", "{d}/chat.jsonl"], ["--llm-template is tgi"]),
    (["--payload", "{d}/bad.jsonl", "--llm-template", "tgi"], ["--llm-template shapes LLM requests"]),
    (["--prompts", "synthetic:8", "--llm-template", "messages", "--llm-details", "false"], ["--llm-details false"]),
    (["--prompts", "synthetic:0"], ["synthetic:0", "at least 1 token"]),
])
def test_bad_llm_input_is_one_line_exit_2(argv, needles, tmp_path, capsys):
    write(tmp_path / "bad.jsonl", {"prompt": "ok"}, {"text": "no prompt here"})
    write(tmp_path / "chat.jsonl", {"messages": [{"role": "user", "content": "hi"}]})
    out = tmp_path / "run"
    code = main(["run", "--endpoint-name", "ep", "--endpoint-url", "http://127.0.0.1:9", "--out", str(out),
                 *[a.format(d=tmp_path) for a in argv]])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("sm-locust: error: "), err
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert not out.exists()
