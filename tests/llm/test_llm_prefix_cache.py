"""Automatic prefix caching in the LLM emulation (`serve --llm --llm-prefix-cache-blocks N`,
sm_locust.endpoint.llm_prefix): chain keys of full blocks, the bounded LRU and vLLM's last-token rule,
exact hit and miss counts for the synthetic prompts with and without shared prefixes and for a trace's
hash_ids (pure, on the scheduler), TTFT falling with shared prefixes on the virtual clock, and the served
endpoint's counters against what its own request log says it received."""

from __future__ import annotations

import time

import orjson
import pytest

from sm_locust.endpoint.llm import BatchModel, ContinuousBatcher, LlmConfig, LlmEngine, Sequence, admission_counts
from sm_locust.endpoint.llm_prefix import PrefixCache, block_keys
from sm_locust.llm.trace import BLOCK_TOKENS, TracePrompts, TraceRow, read_trace
from sm_locust.payloads.llm import _WORDS, synthetic_prompts
from tests.conftest import ROOT, run_cli

MODEL = BatchModel(max_sequences=16, step_ms=5.0, step_ms_per_seq=0.1, prefill_ms_per_token=0.2)


def sequence(prompt: str, block: int, output_tokens: int = 1, arrived: float = 0.0) -> Sequence:
    words = prompt.split()
    return Sequence(len(words), output_tokens, arrived=arrived, blocks=block_keys(words, block),
                    block_units=len(words))


def admit_one_by_one(prompts: list[str], cache: PrefixCache | None, block: int) -> list[Sequence]:
    """Each prompt admitted alone, in order (a step each)."""
    batcher = ContinuousBatcher(MODEL, cache)
    admitted = []
    for prompt in prompts:
        s = sequence(prompt, block)
        batcher.submit(s)
        step = batcher.plan()
        assert step is not None and step.admitted == [s]
        batcher.finish(step, 0.0)
        admitted.append(s)
    return admitted


def test_block_keys_chain_full_blocks_only():
    a = block_keys("a b c d e f g".split(), 3)
    b = block_keys("a b c x y z".split(), 3)
    c = block_keys("q r s d e f".split(), 3)
    assert len(a) == 2 and len(b) == 2  # 7 words: the 7th is a partial block, never cached
    assert a[0] == b[0] and a[1] != b[1]  # a shared first block, then each its own
    assert a[1] != c[1]  # the same second block behind another first block: another key (the chain)
    assert block_keys([1, 2, 3, 4, 5, 6], 3)[1] != block_keys([9, 2, 3, 4, 5, 6], 3)[1]  # token ids alike
    assert block_keys([1, 2], 3) == () and block_keys("a b".split(), 3) == ()


def test_an_adapters_blocks_are_its_own():
    words = "a b c d e f".split()
    base, one, two = block_keys(words, 3), block_keys(words, 3, "adapter-1"), block_keys(words, 3, "adapter-2")
    assert len({base[0], one[0], two[0]}) == 3 and len({base[1], one[1], two[1]}) == 3
    assert block_keys(words, 3, "adapter-1") == one


def engine_hits(engine: LlmEngine, prompt: str, component: str | None) -> int:
    """Send one request to the live engine (a loop thread, no server) and read its answer: its cache hits."""
    body = orjson.dumps({"inputs": prompt, "parameters": {"max_new_tokens": 1}})
    formatter, s = engine.start(body, component)
    list(engine.tokens(formatter, s))
    return s.lookup.hits


def test_the_engine_keys_blocks_by_adapter_and_counts_admissions():
    counted: dict[str, int] = {}

    class Counters:
        def add(self, **amounts):
            for k, v in amounts.items():
                counted[k] = counted.get(k, 0) + v

    engine = LlmEngine(LlmConfig(step_ms=0.5, step_ms_per_seq=0.0, prefill_ms_per_token=0.0, block_tokens=4,
                                 prefix_cache_blocks=100, adapters="2"), counters=Counters())
    prompt = " ".join(f"w{i}" for i in range(9))  # 2 full blocks of 4 words, then 1
    assert [engine_hits(engine, prompt, c) for c in ("base", "base", "adapter-1", "adapter-1", "adapter-2", None)] \
        == [0, 2, 0, 2, 0, 2]  # the base component and no component are the base model's
    assert counted == {"llm_prefill_tokens": 6 * 9 - 3 * 8, "llm_prefix_cache_hit_blocks": 6,
                       "llm_prefix_cache_miss_blocks": 6}
    # without adapters hosted, a component name changes nothing (the request is refused before, by the server)
    plain = LlmEngine(LlmConfig(step_ms=0.5, block_tokens=4, prefix_cache_blocks=100))
    assert [engine_hits(plain, prompt, c) for c in (None, "adapter-1")] == [0, 2]


def test_the_last_token_is_always_prefilled():
    cache = PrefixCache(100, 4)
    keys = block_keys(list(range(8)), 4)
    assert cache.admit(keys, 8).hits == 0
    again = cache.admit(keys, 8)  # all cached, but the last token makes the first output token
    assert (again.blocks, again.hits, again.misses) == (2, 1, 1)
    longer = cache.admit(block_keys(list(range(9)), 4), 9)  # a 9th token: both blocks reusable
    assert (longer.hits, longer.misses) == (2, 0)
    s = Sequence(8, 1, blocks=keys, block_units=8)
    ContinuousBatcher(MODEL, cache)._look_up(s)
    assert s.cached_tokens == 4 and s.prefill_tokens == 4


def test_the_cache_is_bounded_and_evicts_the_least_recently_used_last_blocks_first():
    cache = PrefixCache(3, 2)
    first = block_keys(list(range(6)), 2)  # 3 blocks: the cache full
    cache.admit(first, 7)
    assert len(cache) == 3
    other = block_keys([50, 51], 2)
    cache.admit(other, 3)
    assert len(cache) == 3 and cache.evictions == 1
    assert first[0] in cache and first[1] in cache and first[2] not in cache  # its last block went first
    assert cache.admit(first, 7).hits == 2  # the shared prefix still serves
    with pytest.raises(ValueError):
        PrefixCache(0, 16)


def test_shared_prefixes_hit_exactly_once_each_prefix_is_cached():
    """The 64 prompts of `synthetic:512,prefix=256,prefixes=4`, 256-token blocks: each prompt's first block is
    one of 4 prefixes (a miss the first time, a hit after), its second its own (prefilled: new, and at
    most the blocks before the last token are reused). Without prefixes nothing is shared."""
    prefixed = [p for p, _ in synthetic_prompts("512,prefix=256,prefixes=4", seed=3)]
    plain = [p for p, _ in synthetic_prompts("512", seed=3)]
    cached = admit_one_by_one(prefixed, PrefixCache(10_000, 256), 256)
    assert sum(s.lookup.hits for s in cached) == 64 - 4
    assert sum(s.lookup.misses for s in cached) == 4 + 64
    assert sum(s.prefill_tokens for s in cached) == 64 * 512 - 60 * 256
    assert admission_counts(cached) == {"llm_prefill_tokens": 64 * 512 - 60 * 256,
                                        "llm_prefix_cache_hit_blocks": 60, "llm_prefix_cache_miss_blocks": 68}
    alone = admit_one_by_one(plain, PrefixCache(10_000, 256), 256)
    assert sum(s.lookup.hits for s in alone) == 0 and sum(s.lookup.misses for s in alone) == 128
    # the same prompts sent again: every first block hits (the last-token rule keeps the second one's prefill)
    twice = admit_one_by_one(plain + plain, PrefixCache(10_000, 256), 256)
    assert sum(s.lookup.hits for s in twice) == 64
    # no cache: every prompt prefilled whole, nothing looked up
    assert admission_counts(admit_one_by_one(prefixed, None, 256)) == {"llm_prefill_tokens": 64 * 512}
    # a cache too small for the 4 prefixes and the prompts' own blocks between them: fewer hits
    small = admit_one_by_one(prefixed, PrefixCache(4, 256), 256)
    assert 0 < sum(s.lookup.hits for s in small) < 60


def expected_trace_hits(rows: list[TraceRow]) -> list[int]:
    """Each row's reused blocks by its hash_ids alone: the leading ids whose prefix was seen before (whole
    512-token blocks before the row's last token)."""
    seen: set[tuple[int, ...]] = set()
    hits = []
    for row in rows:
        full = row.hash_ids[:row.input_length // BLOCK_TOKENS]
        reusable = min(len(full), (row.input_length - 1) // BLOCK_TOKENS)
        n = 0
        while n < reusable and full[:n + 1] in seen:
            n += 1
        hits.append(n)
        seen.update(full[:i] for i in range(1, len(full) + 1))
    return hits


def test_a_traces_equal_hash_ids_are_hits():
    rows = [TraceRow(0, 1200, 4, (1, 2, 3)), TraceRow(1, 1100, 4, (1, 2, 4)), TraceRow(2, 1024, 4, (1, 2)),
            TraceRow(3, 1500, 4, (5, 2, 3)), TraceRow(4, 700, 4, (1, 9)), TraceRow(5, 1536, 4, (1, 2, 3))]
    writer = TracePrompts(_WORDS, seed=2)
    prompts = [writer.prompt(row, i) for i, row in enumerate(rows)]
    cached = admit_one_by_one(prompts, PrefixCache(10_000, BLOCK_TOKENS), BLOCK_TOKENS)
    assert [s.lookup.hits for s in cached] == expected_trace_hits(rows) == [0, 2, 1, 0, 1, 2]
    assert [s.prefill_tokens for s in cached] == [r.input_length - h * BLOCK_TOKENS
                                                  for r, h in zip(rows, [0, 2, 1, 0, 1, 2], strict=True)]


def mean_ttft_s(prompts: list[str], cache: PrefixCache | None, gap_s: float = 0.05) -> float:
    """Open-loop arrivals `gap_s` apart on a virtual clock, 4-token answers: the mean time to first token."""
    batcher = ContinuousBatcher(MODEL, cache)
    pending = [sequence(p, 256, output_tokens=4, arrived=i * gap_s) for i, p in enumerate(prompts)]
    done: list[Sequence] = []
    now = 0.0
    while len(done) < len(prompts):
        while pending and pending[0].arrived <= now:
            batcher.submit(pending.pop(0))
        step = batcher.plan()
        if step is None:
            now = pending[0].arrived
            continue
        now += step.duration_s
        done.extend(batcher.finish(step, now))
    return sum(s.first_token_at - s.arrived for s in done) / len(done)


def test_ttft_falls_with_shared_prefixes():
    prefixed = [p for p, _ in synthetic_prompts("512,prefix=256,prefixes=4", seed=5)]
    plain = [p for p, _ in synthetic_prompts("512", seed=5)]
    with_cache = mean_ttft_s(prefixed, PrefixCache(10_000, 256))
    assert with_cache < mean_ttft_s(prefixed, None)  # the cache skips the shared blocks' prefill
    assert with_cache < mean_ttft_s(plain, PrefixCache(10_000, 256))  # nothing to share: no gain
    assert mean_ttft_s(plain, PrefixCache(10_000, 256)) == pytest.approx(mean_ttft_s(plain, None))


def test_the_option_round_trips_and_is_checked():
    config = LlmConfig(prefix_cache_blocks=64, block_tokens=16)
    assert config.flags() == ["--llm", "--llm-block-tokens", "16", "--llm-prefix-cache-blocks", "64"]
    assert config.prefix_cache() is not None and LlmConfig().prefix_cache() is None
    with pytest.raises(ValueError, match="--llm-prefix-cache-blocks must not be negative"):
        LlmConfig(prefix_cache_blocks=-1).validate()


def test_the_flag_without_llm_is_one_line_exit_2(capsys):
    from sm_locust.cli import main

    assert main(["serve", "--llm-prefix-cache-blocks", "8"]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and "--llm-prefix-cache-blocks" in lines[0] and "--llm" in lines[0], lines


def log_expectation(lines: list[dict], block: int) -> dict[str, int]:
    """The counters the endpoint should report for the requests its log holds, in arrival order (its blocks
    are CRC-32s of each block alone: a prefix is the tuple of a request's leading ones)."""
    seen: set[tuple[int, ...]] = set()
    hits = misses = prefill = 0
    for line in lines:
        blocks = tuple(line["blocks"])
        reusable = min(len(blocks), (line["prompt_tokens"] - 1) // block)
        n = 0
        while n < reusable and blocks[:n + 1] in seen:
            n += 1
        seen.update(blocks[:i] for i in range(1, len(blocks) + 1))
        hits, misses, prefill = hits + n, misses + len(blocks) - n, prefill + line["prompt_tokens"] - n * block
    return {"llm_prefix_cache_hit_blocks": hits, "llm_prefix_cache_miss_blocks": misses,
            "llm_prefill_tokens": prefill}


@pytest.mark.e2e
def test_the_endpoint_counts_hits_and_misses_of_what_it_received(endpoint_factory, tmp_path):
    """`serve --llm --llm-prefix-cache-blocks` (one worker: one cache) against `synthetic:512` with and without
    4 shared 256-token prefixes: its counters are what its own request log implies, exactly, and the
    prefixes hit where the plain prompts (until they come round again) do not."""
    counted = {}
    for name, spec in (("plain", "synthetic:512"), ("prefixed", "synthetic:512,prefix=256,prefixes=4")):
        log = tmp_path / f"{name}.jsonl"
        ep = endpoint_factory(workers=1, llm=LlmConfig(max_sequences=16, step_ms=5.0, step_ms_per_seq=0.1,
                                                       prefill_ms_per_token=0.01, block_tokens=256,
                                                       prefix_cache_blocks=10_000, request_log=str(log)))
        result = run_cli("run", "--endpoint-name", "llm", "--endpoint-url", ep.url, "--prompts", spec,
                         "--max-new-tokens", "2", "--stream", "true", "-u", "4", "-t", "5s", "--out",
                         str(tmp_path / name), timeout=90)
        assert result.returncode == 0, result.stdout + result.stderr
        received = [orjson.loads(line) for line in log.read_bytes().splitlines()]
        received = [line for line in received if "prompt_tokens" in line]
        assert len(received) >= 8, len(received)
        expected = log_expectation(received, 256)
        keys = list(expected)
        deadline = time.monotonic() + 10
        while True:  # the last requests' admissions are counted as their step starts
            stats = {k: ep.stats()[k] for k in keys}
            if stats == expected or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert stats == expected
        assert stats["llm_prefix_cache_hit_blocks"] + stats["llm_prefix_cache_miss_blocks"] == 2 * len(received)
        counted[name] = stats, len(received), len({line["blocks"][0] for line in received})
    (plain, plain_n, _), (prefixed, prefixed_n, prefixes) = counted["plain"], counted["prefixed"]
    assert plain["llm_prefix_cache_hit_blocks"] == max(0, plain_n - 64)  # round-robin: a prompt's 2nd time
    assert 1 <= prefixes <= 4  # the 4 prefixes, spread over the 64 prompts: as many as the requests reached
    assert prefixed["llm_prefix_cache_hit_blocks"] == prefixed_n - prefixes  # each prefix missed once only


@pytest.mark.e2e
def test_a_replayed_traces_equal_hash_ids_are_the_endpoints_hits(endpoint_factory, tmp_path):
    """examples/llm/trace.jsonl (60 requests from 12 chats sharing a first block, each chat repeating its history)
    replayed against `serve --llm --llm-prefix-cache-blocks` at the trace's 512-token blocks: the hits are what
    the rows' hash_ids say, in the order the endpoint admitted them, and what the endpoint's own log implies."""
    trace = ROOT / "examples" / "llm" / "trace.jsonl"
    rows = read_trace(trace).rows
    log = tmp_path / "received.jsonl"
    ep = endpoint_factory(workers=1, llm=LlmConfig(max_sequences=64, step_ms=5.0, step_ms_per_seq=0.1,
                                                   prefill_ms_per_token=0.01, prefix_cache_blocks=10_000,
                                                   request_log=str(log)))
    result = run_cli("run", "--endpoint-name", "llm", "--endpoint-url", ep.url, "--trace", str(trace), "--time-scale",
                     "4", "--stream", "true", "--out", str(tmp_path / "run"), timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    received = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    received = [line for line in received if "prompt_tokens" in line]
    # every row arrived once; in the order the endpoint admitted them, which is the trace's except where two
    # sends are a few ms apart (rows 54 and 55: 13 ms, 3 ms at --time-scale 4) and a busy machine swaps them
    by_length: dict[int, list] = {}
    for row in rows:
        by_length.setdefault(row.input_length, []).append(row)
    arrived = [by_length[line["prompt_tokens"]].pop(0) for line in received]
    assert len(arrived) == len(rows) and not any(by_length.values())
    stats = {k: ep.stats()[k] for k in ("llm_prefix_cache_hit_blocks", "llm_prefix_cache_miss_blocks",
                                       "llm_prefill_tokens")}
    assert stats == log_expectation(received, BLOCK_TOKENS)
    hits = expected_trace_hits(arrived)
    assert stats["llm_prefix_cache_hit_blocks"] == sum(hits) > 0
    assert stats["llm_prefill_tokens"] == sum(r.input_length - h * BLOCK_TOKENS for r, h in zip(arrived, hits,
                                                                                                strict=True))
