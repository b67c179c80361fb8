"""`--tokenizer` (sm_locust.llm.tokenizer) and shared prefixes: synthetic prompts of exact lengths by a
model's own tokenizer, dataset prompts and non-streamed answers counted by it, the prefixes of
`synthetic:512,prefix=256,prefixes=4`, and what the local endpoint counts of them under the same
tokenizer (`serve --llm --llm-tokenizer`). The tokenizer is trained here on a few lines (a byte-level
BPE with few merges, so English words are several tokens each under it): nothing is downloaded."""

from __future__ import annotations

import json
import sys
from collections import Counter

import orjson
import pytest

from sm_locust.cli import main
from sm_locust.endpoint.llm import LlmConfig, LlmEngine
from sm_locust.errors import UsageError
from sm_locust.llm.tokenizer import load_tokenizer
from sm_locust.llm.tokens import count_response, estimate_tokens
from sm_locust.payloads.llm import INPUT_TOKENS, LlmSettings, build_pool, synthetic_prompts
from tests.conftest import run_cli

tokenizers = pytest.importorskip("tokenizers")

LINES = ["the quick brown fox jumps over the lazy dog", "a cat sat on the mat and the dog sat on a log",
         "prefix caching serves shared prompts faster", "tokens per second and time to first token"]


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    """A folder holding a tokenizer.json: byte-level BPE, 320 pieces, trained on LINES."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(LINES * 20, trainer)
    folder = tmp_path_factory.mktemp("model")
    tok.save(str(folder / "tokenizer.json"))
    return folder


def ids(tokenizer, text):
    return tokenizer.backend.encode(text, add_special_tokens=False).ids


def test_synthetic_prompts_are_exact_by_the_tokenizer(tokenizer_dir):
    tokenizer = load_tokenizer(tokenizer_dir)
    prompts = synthetic_prompts("300", seed=4, tokenizer=tokenizer)
    assert len(prompts) == 64 and [len(ids(tokenizer, p)) for p, _ in prompts] == [300] * 64
    # the word estimate's prompts are far longer under this tokenizer: the tokenizer made the difference
    assert min(tokenizer.count(p) for p, _ in synthetic_prompts("300", seed=4)) > 300
    varied = synthetic_prompts("20-60", seed=2, tokenizer=tokenizer)
    assert synthetic_prompts("20-60", seed=2, tokenizer=tokenizer) == varied
    assert len({tokenizer.count(p) for p, _ in varied}) > 5


def test_the_pool_carries_the_tokenizer_counts(tokenizer_dir, tmp_path):
    pool = build_pool(LlmSettings("synthetic:300", "messages", 16, tokenizer=str(tokenizer_dir)).check(),
                      stream=True)
    tokenizer = load_tokenizer(tokenizer_dir / "tokenizer.json")
    contents = [orjson.loads(i.body)["messages"][0]["content"] for i in pool.invocations]
    assert {tokenizer.count(c) for c in contents} == {300}
    assert {i.extra[INPUT_TOKENS] for i in pool.invocations} == {300}
    dataset = tmp_path / "p.jsonl"
    dataset.write_text("\n".join(json.dumps({"prompt": p}) for p in ("the lazy dog", "Summarise: fox, cat!")) + "\n")
    counted = build_pool(LlmSettings(str(dataset), tokenizer=str(tokenizer_dir)).check(), stream=False)
    assert [i.extra[INPUT_TOKENS] for i in counted.invocations] == [
        len(ids(tokenizer, "the lazy dog")), len(ids(tokenizer, "Summarise: fox, cat!"))]
    assert counted.invocations[1].extra[INPUT_TOKENS] != estimate_tokens("Summarise: fox, cat!")


def test_answers_without_server_counts_are_counted_by_it(tokenizer_dir):
    tokenizer = load_tokenizer(tokenizer_dir)
    body = json.dumps({"generated_text": "Summarise the quick fox"}).encode()
    assert count_response(body).counted == 4
    assert count_response(body, tokenizer.count).counted == len(ids(tokenizer, "Summarise the quick fox")) != 4


def test_shared_prefixes_four_of_256_tokens(tokenizer_dir):
    tokenizer = load_tokenizer(tokenizer_dir)
    prompts = [p for p, _ in synthetic_prompts("512,prefix=256,prefixes=4", seed=7, tokenizer=tokenizer)]
    encoded = [ids(tokenizer, p) for p in prompts]
    assert [len(e) for e in encoded] == [512] * 64
    heads = Counter(tuple(e[:256]) for e in encoded)
    assert len(heads) == 4 and sorted(heads.values()) == [16, 16, 16, 16]
    assert len({tuple(e[256:]) for e in encoded}) == 64  # the rest differs
    again = [p for p, _ in synthetic_prompts("512,prefix=256,prefixes=4", seed=7, tokenizer=tokenizer)]
    assert again == prompts
    plain = [p.split() for p, _ in synthetic_prompts("100-200,prefix=50,prefixes=3", seed=1)]
    assert len({tuple(w[:50]) for w in plain}) == 3 and all(100 <= len(w) <= 200 for w in plain)


@pytest.mark.parametrize("spec, needle", [
    ("512,prefix=512", "must be longer than their prefix"),
    ("512,prefixes=4", "needs prefix=TOKENS"),
    ("512,prefix=256,prefixes=0", "prefixes must be 1 to 64"),
    ("512,shared=2", "is not prefix=TOKENS or prefixes=COUNT"),
])
def test_bad_prefix_specs(spec, needle):
    with pytest.raises(UsageError, match=needle):
        synthetic_prompts(spec)


def test_bad_tokenizer_paths(tmp_path, monkeypatch):
    with pytest.raises(UsageError, match="the folder holds no tokenizer.json"):
        load_tokenizer(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{\"not\": \"a tokenizer\"}")
    with pytest.raises(UsageError, match="is not a Hugging Face tokenizer.json"):
        load_tokenizer(tmp_path)
    load_tokenizer.cache_clear()
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # not installed
    with pytest.raises(UsageError, match=r"needs the tokenizers package.*sm-locust\[tokenizer\]"):
        load_tokenizer(tmp_path)


def test_missing_package_is_one_line_exit_2(tokenizer_dir, tmp_path, capsys, monkeypatch):
    load_tokenizer.cache_clear()  # loaded once per path and process: forget the loads of the tests above
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    out = tmp_path / "run"
    code = main(["run", "--endpoint-name", "ep", "--endpoint-url", "http://127.0.0.1:9", "--out", str(out),
                 "--prompts", "synthetic:300", "--tokenizer", str(tokenizer_dir)])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "pip install 'sm-locust[tokenizer]'" in lines[0], lines
    assert not out.exists()
    code = main(["run", "--endpoint-name", "ep", "--endpoint-url", "http://127.0.0.1:9", "--out", str(out),
                 "--payload", "x.json", "--tokenizer", str(tokenizer_dir)])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "--tokenizer shapes LLM requests" in lines[0], lines


def test_the_endpoint_counts_prompts_by_the_same_tokenizer(tokenizer_dir, tmp_path):
    log = tmp_path / "received.jsonl"
    engine = LlmEngine(LlmConfig(tokenizer=str(tokenizer_dir), block_tokens=4, request_log=str(log)))
    prompt = "the quick brown fox jumps over the lazy dog"
    request = engine.received(json.dumps({"inputs": prompt, "parameters": {"max_new_tokens": 2}}).encode())
    tokenizer = load_tokenizer(tokenizer_dir)
    count = len(ids(tokenizer, prompt))
    assert request.prompt_tokens == count != estimate_tokens(prompt)  # the prefill is the tokenizer's count too
    record = orjson.loads(log.read_bytes().splitlines()[0])
    assert record["prompt_tokens"] == count and len(record["blocks"]) == count // 4
    with pytest.raises(ValueError, match="--llm-tokenizer .*no such file"):
        LlmConfig(tokenizer=str(tmp_path / "none.json")).validate()
    with pytest.raises(ValueError, match="--llm-block-tokens must be at least 1"):
        LlmConfig(block_tokens=0).validate()


@pytest.mark.e2e
def test_the_endpoint_receives_exact_lengths_and_four_prefixes(endpoint_factory, tokenizer_dir, tmp_path):
    """Against `serve --llm --llm-tokenizer` counting what it receives: every `synthetic:300` request is 300
    tokens by the tokenizer, and `synthetic:512,prefix=256,prefixes=4` sends exactly 4 distinct 256-token
    prefixes (the first 256-token block's hash), the rest of each prompt its own."""
    received = {}
    for name, spec in (("exact", "synthetic:300"), ("prefixed", "synthetic:512,prefix=256,prefixes=4")):
        log = tmp_path / f"{name}.jsonl"
        ep = endpoint_factory(llm=LlmConfig(max_sequences=16, step_ms=5.0, step_ms_per_seq=0.1,
                                            prefill_ms_per_token=0.0, tokenizer=str(tokenizer_dir),
                                            block_tokens=256, request_log=str(log)))
        out = tmp_path / name
        result = run_cli("run", "--endpoint-name", "llm", "--endpoint-url", ep.url, "--prompts", spec, "--tokenizer",
                         str(tokenizer_dir), "--max-new-tokens", "2", "--stream", "true", "-u", "8", "-t", "8s",
                         "--out", str(out), timeout=90)
        assert result.returncode == 0, result.stdout + result.stderr
        received[name] = [orjson.loads(line) for line in log.read_bytes().splitlines()]
        received[name] = [line for line in received[name] if "prompt_tokens" in line]
        assert len(received[name]) >= 64, len(received[name])  # round-robin: every one of the 64 prompts sent
    assert {line["prompt_tokens"] for line in received["exact"]} == {300}
    prefixed = received["prefixed"]
    assert {line["prompt_tokens"] for line in prefixed} == {512} and {len(line["blocks"]) for line in prefixed} == {2}
    tails_of: dict[int, set[int]] = {}  # each prefix block: the prompts' own blocks sent after it
    for line in prefixed:
        tails_of.setdefault(line["blocks"][0], set()).add(line["blocks"][1])
    assert len(tails_of) == 4 and sorted(len(tails) for tails in tails_of.values()) == [16, 16, 16, 16]
    assert len(set().union(*tails_of.values())) == 64  # 64 prompts, 16 behind each prefix
