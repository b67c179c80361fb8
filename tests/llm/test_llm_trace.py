"""Trace replay (`--trace FILE`, Mooncake format): reading, prompts with shared blocks, sending at the traced
times, and a run checked against what the local LLM endpoint received."""

from __future__ import annotations

import json
import statistics

import orjson
import pytest

from sm_locust.cli import main
from sm_locust.endpoint.llm import LlmConfig
from sm_locust.endpoint.llm_wire import parse_request, request_record
from sm_locust.errors import UsageError
from sm_locust.llm.tokens import INPUT_TOKENS, estimate_tokens
from sm_locust.llm.trace import BLOCK_TOKENS, TracePrompts, TraceRow, lateness, parse_row, read_trace
from sm_locust.payloads.llm import LlmSettings, build_pool
from sm_locust.users.openloop import OpenLoopCounters
from sm_locust.users.trace import TraceReplay
from tests.clocks import StepClock
from tests.conftest import run_cli

WORDS = "the of and to in is was for on that with as by at from his her this had not are but".split()


def write_trace(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def forty_rows() -> list[dict]:
    """40 requests over 3.45 s: bursts of equal times, half of them sharing block 0 (a system prompt)."""
    rows, next_id = [], 1
    for i in range(40):
        length = 300 + 37 * i
        blocks = -(-length // BLOCK_TOKENS)
        ids = ([0] if i % 2 == 0 else []) + list(range(next_id, next_id + blocks - (i % 2 == 0)))
        next_id += blocks
        rows.append({"timestamp": (i // 2) * 200 if i < 30 else 3000 + (i - 30) * 50,
                     "input_length": length, "output_length": 4 + i % 5, "hash_ids": ids})
    return rows


def test_a_trace_is_read_in_time_order(tmp_path):
    rows = [{"timestamp": 500, "input_length": 600, "output_length": 3, "hash_ids": [0, 1]},
            {"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [0]},
            {"timestamp": 500, "input_length": 20, "output_length": 1}]
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b"".join(orjson.dumps(r) + b"\n\n" for r in rows))
    trace = read_trace(path)
    assert [(r.timestamp_ms, r.input_length, r.line) for r in trace.rows] == [(0, 10, 3), (500, 600, 1), (500, 20, 5)]
    assert trace.rows[2].hash_ids == () and trace.duration_s == 0.5
    assert trace.offsets_s() == [0.0, 0.5, 0.5] and trace.offsets_s(2.0) == [0.0, 0.25, 0.25]
    described = trace.describe()
    assert (described["requests"], described["input_tokens"], described["output_tokens"]) == (3, 630, 6)
    assert (described["blocks"], described["distinct_blocks"]) == (3, 2)


@pytest.mark.parametrize(("line", "needle"), [
    (b"[1, 2]", "t.jsonl:1: not a JSON object"),
    (b"{\"timestamp\": 0, \"input_length\": 5}", "t.jsonl:1: no 'output_length'"),
    (b"{\"timestamp\": -1, \"input_length\": 5, \"output_length\": 1}", "timestamp must be milliseconds >= 0"),
    (b"{\"timestamp\": true, \"input_length\": 5, \"output_length\": 1}", "timestamp must be milliseconds"),
    (b"{\"timestamp\": 0, \"input_length\": 0, \"output_length\": 1}", "input_length must be a whole number"),
    (b"{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 2.5}", "output_length must be a whole number"),
    (b"{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": [1, -2]}", "hash_ids must be"),
    (b"{\"timestamp\": 0, \"input_length\": 513, \"output_length\": 1, \"hash_ids\": [1, 2, 3]}",
     "3 hash_ids for input_length 513: one id per 512-token block makes at most 2"),
])
def test_a_bad_line_is_one_error_naming_it(line, needle):
    with pytest.raises(UsageError, match=needle.replace("[", r"\[")):
        parse_row(line, "t.jsonl:1")


def test_traces_are_bounded(tmp_path):
    path = write_trace(tmp_path / "t.jsonl", [{"timestamp": i, "input_length": 1, "output_length": 1}
                                              for i in range(5)])
    assert len(read_trace(path, max_rows=5).rows) == 5
    with pytest.raises(UsageError, match="holds more than 4 requests"):
        read_trace(path, max_rows=4)
    with pytest.raises(UsageError, match="is over 0 MB"):
        read_trace(path, max_bytes=100)
    with pytest.raises(UsageError, match="no such file"):
        read_trace(tmp_path / "missing.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(UsageError, match="holds no requests"):
        read_trace(tmp_path / "empty.jsonl")


def test_equal_hash_ids_share_their_blocks():
    prompts = TracePrompts(WORDS, seed=3)
    a = prompts.prompt_words(TraceRow(0, 1300, 1, (7, 8, 9)), 0)
    b = prompts.prompt_words(TraceRow(0, 1100, 1, (7, 8, 4)), 1)
    c = prompts.prompt_words(TraceRow(0, 1500, 1, (7,)), 2)
    assert len(a) == 1300 and len(b) == 1100 and len(c) == 1500
    assert a[:1024] == b[:1024] and a[1024:1100] != b[1024:1100]  # blocks 7, 8 shared; 9 and 4 not
    assert c[:512] == a[:512] and c[512:1024] != a[512:1024]  # block 7, then c's own words
    assert a[1024:] == prompts.block(9)[:276]  # a partial last block is its block's start
    assert TracePrompts(WORDS, seed=3).prompt(TraceRow(0, 1300, 1, (7, 8, 9)), 0) == " ".join(a)  # seeded
    assert TracePrompts(WORDS, seed=4).prompt_words(TraceRow(0, 600, 1, (7,)), 0)[:512] != a[:512]
    assert prompts.prompt_words(TraceRow(0, 40, 1), 5) != prompts.prompt_words(TraceRow(0, 40, 1), 6)
    assert estimate_tokens(prompts.prompt(TraceRow(0, 777, 1, (1, 2)), 0)) == 777


def test_the_pool_builds_each_row_as_traced(tmp_path):
    path = write_trace(tmp_path / "t.jsonl", forty_rows())
    pool = build_pool(LlmSettings(trace=path).check(), stream=True, seed=1)
    assert len(pool) == 40 and pool.sizes()["count"] == 40
    for index in (0, 1, 39):
        row = pool.trace.rows[index]
        invocation = pool.invocation(index)
        request = parse_request(invocation.body)
        assert (request.prompt_tokens, request.max_new_tokens) == (row.input_length, row.output_length)
        assert invocation.extra[INPUT_TOKENS] == row.input_length
    chat = build_pool(LlmSettings(trace=path, template="messages").check(), stream=False)
    body = orjson.loads(chat.invocation(3).body)
    assert body["max_tokens"] == chat.trace.rows[3].output_length and len(body["messages"]) == 1


@pytest.mark.parametrize(("settings", "needle"), [
    (LlmSettings(trace="t.jsonl", prompts="synthetic:5"), "drop --prompts"),
    (LlmSettings(trace="t.jsonl", max_new_tokens=5), "drop --max-new-tokens"),
    (LlmSettings(trace="t.jsonl", turns=3), "drop --turns"),
])
def test_trace_conflicts(settings, needle):
    with pytest.raises(UsageError, match=needle):
        settings.check()
    with pytest.raises(UsageError, match="drop --payload"):
        LlmSettings(trace="t.jsonl").check("body.json")


def test_a_body_over_6_mb_is_refused_before_the_run(tmp_path):
    path = write_trace(tmp_path / "t.jsonl", [{"timestamp": 0, "input_length": 2_000_000, "output_length": 1}])
    with pytest.raises(UsageError, match="t.jsonl' line 1: input_length 2,000,000 makes a request body over"):
        build_pool(LlmSettings(trace=path).check(), stream=True)




class Pool:
    def __init__(self, rows):
        from sm_locust.llm.trace import Trace

        self.trace = Trace(tuple(rows), "t.jsonl")

    def __len__(self):
        return len(self.trace.rows)

    def invocation(self, index):
        return ("invocation", index)


def test_the_replay_sends_each_row_at_its_time():
    clock = StepClock(100.0)
    sent: list[tuple] = []

    def call(invocation, started):
        sent.append((invocation[1], started))

    rows = [TraceRow(t, 5, 1) for t in (1000, 1000, 1500, 3000)]
    replay = TraceReplay(Pool(rows), call, OpenLoopCounters(), time_scale=2.0, clock=clock, sleep=clock.sleep)
    replay.run()
    assert replay.done and [s[0] for s in sent] == [0, 1, 2, 3]
    assert [round(s[1] - 100.0, 6) for s in sent] == [0.0, 0.0, 0.25, 1.0]  # offsets / --time-scale
    assert clock.sleeps == [0.25, 0.75] and replay.lags_s == [0.0] * 4  # it waited for each, and sent on time
    assert replay.counters.snapshot() == (4, 0, 0)
    assert replay.describe()["sent"] == 4 and replay.describe()["not_sent"] == 0


def test_a_late_send_is_counted_and_a_full_pool_drops():
    clock = StepClock(100.0)
    replay = TraceReplay(Pool([TraceRow(t, 5, 1) for t in (0, 10, 20)]), lambda invocation, started: None,
                         OpenLoopCounters(), clock=clock, sleep=clock.sleep)
    real_invocation = replay.pool.invocation

    def slow_build(index):  # building row 1 takes 40 ms: it leaves 30 ms late, after the 25-ms tolerance
        clock.now += 0.04 if index == 1 else 0.0
        return real_invocation(index)

    replay.pool.invocation = slow_build
    replay.run()
    assert replay.counters.snapshot() == (3, 1, 0)
    assert [round(lag * 1000) for lag in replay.lags_s] == [0, 30, 20]
    assert lateness(replay.lags_s) == {"p50": 20.0, "p95": 30.0, "max": 30.0} and lateness([]) == {}
    full = TraceReplay(Pool([TraceRow(t, 5, 1) for t in (0, 0)]), lambda invocation, started: None,
                       OpenLoopCounters(), max_in_flight=1, clock=clock, sleep=clock.sleep)
    full.in_flight.full = lambda: True
    full.run()
    assert full.counters.snapshot() == (0, 0, 2) and full.describe()["dropped"] == 2


def test_a_row_that_cannot_be_written_is_skipped_and_the_replay_still_ends():
    clock = StepClock(100.0)
    sent: list[int] = []
    replay = TraceReplay(Pool([TraceRow(t, 5, 1) for t in (0, 10, 20)]),
                         lambda invocation, started: sent.append(invocation[1]), OpenLoopCounters(), clock=clock,
                         sleep=clock.sleep)
    real_invocation = replay.pool.invocation

    def failing(index):
        if index == 1:
            raise UsageError("trace line 2: cannot write a prompt of exactly 5 tokens with this tokenizer")
        return real_invocation(index)

    replay.pool.invocation = failing
    replay.run()
    assert replay.done and sent == [0, 2] and replay.describe()["unbuilt"] == 1
    assert replay.describe()["not_sent"] == 0
    broken = TraceReplay(Pool([TraceRow(0, 5, 1)]), lambda invocation, started: None, OpenLoopCounters(),
                         clock=clock, sleep=clock.sleep)
    broken.pool.invocation = lambda index: 1 / 0
    with pytest.raises(ZeroDivisionError):
        broken.run()
    assert broken.done  # the shape is never left waiting


def test_the_endpoint_records_what_it_received():
    prompts = TracePrompts(WORDS, seed=0)
    text = prompts.prompt(TraceRow(0, 1100, 1, (5, 6, 7)), 0)
    record = orjson.loads(request_record(parse_request(orjson.dumps({"inputs": text, "parameters": {
        "max_new_tokens": 9}})), 12.5))
    assert (record["t"], record["prompt_tokens"], record["max_new_tokens"]) == (12.5, 1100, 9)
    other = prompts.prompt(TraceRow(0, 1024, 1, (5, 8)), 1)
    again = orjson.loads(request_record(parse_request(orjson.dumps({"inputs": other})), 13.0))
    assert len(record["blocks"]) == 2 and len(again["blocks"]) == 2  # whole 512-word blocks only
    assert again["blocks"][0] == record["blocks"][0] and again["blocks"][1] != record["blocks"][1]


def test_trace_options_against_the_shapes(tmp_path, capsys):
    path = write_trace(tmp_path / "t.jsonl", forty_rows())
    out = tmp_path / "run"
    base = ["run", "--endpoint-name", "ep", "--endpoint-url", "http://127.0.0.1:9", "--out", str(out),
            "--trace", path]
    for extra, needle in ((["--shape", "step"], "--trace sets when each request is sent"),
                          (["--processes", "2"], "--trace replays from one Locust process"),
                          (["-u", "3"], "--users conflicts with the trace shape"),
                          (["--arrival", "poisson"], "--arrival shapes a rate"),
                          (["--prompts", "synthetic:4"], "drop --prompts")):
        code = main(base + extra)
        lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1 and needle in lines[0], (extra, lines)
    assert not out.exists()
    code = main(["run", "--endpoint-name", "ep", "--endpoint-url", "http://127.0.0.1:9", "--out", str(out),
                 "--payload", "x.json", "--time-scale", "2"])
    assert code == 2 and "--time-scale compresses the phases of --traffic or the times of --trace" in \
        capsys.readouterr().err
    (tmp_path / "bad.jsonl").write_text("{\"timestamp\": 0}\n")
    code = main(base[:-1] + [str(tmp_path / "bad.jsonl")])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "bad.jsonl:1: no 'input_length' or 'output_length'" in lines[0], lines


@pytest.mark.e2e
def test_a_forty_request_trace_arrives_at_its_times_with_its_lengths(endpoint_factory, tmp_path):
    rows = forty_rows()
    path = write_trace(tmp_path / "trace.jsonl", rows)
    log = tmp_path / "received.jsonl"
    ep = endpoint_factory(llm=LlmConfig(max_sequences=64, step_ms=5.0, step_ms_per_seq=0.2,
                                        prefill_ms_per_token=0.0, request_log=str(log)))
    out = tmp_path / "run"
    result = run_cli("run", "--endpoint-name", "llm", "--endpoint-url", ep.url, "--trace", path, "--stream", "true",
                     "--out", str(out), timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "stopped: trace replayed: 40 of 40 requests sent" in result.stdout
    lines = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    received = [line for line in lines if "prompt_tokens" in line]
    answers = [line for line in lines if line.get("answer")]
    assert len(received) == 40 and len(answers) == 40 and len(lines) == 80
    assert sorted(len(a["written_itl_ms"]) + 1 for a in answers) == sorted(r["output_length"] for r in rows)
    by_lengths = {(r["input_length"], r["output_length"]): r for r in rows}
    assert len(by_lengths) == 40
    matched = [(by_lengths[(q["prompt_tokens"], q["max_new_tokens"])], q) for q in received]  # lengths as traced
    assert len({id(row) for row, _ in matched}) == 40
    # arrival times: the server's clock against the trace's, the constant offset (connection set-up) removed
    offsets = [q["t"] * 1000.0 - row["timestamp"] for row, q in matched]
    centre = statistics.median(offsets)
    errors = sorted(abs(o - centre) for o in offsets)
    assert errors[37] <= 150.0, errors  # p95 of 40 (nearest rank: the 38th)
    # prefix reuse as traced: each whole block's hash maps one to one onto its hash_id
    block_of: dict[int, int] = {}
    for row, q in matched:
        assert len(q["blocks"]) == row["input_length"] // BLOCK_TOKENS
        for hash_id, block in zip(row["hash_ids"], q["blocks"], strict=False):
            assert block_of.setdefault(hash_id, block) == block
    assert len(set(block_of.values())) == len(block_of)
    assert sum(1 for row, q in matched if q["blocks"] and row["hash_ids"][0] == 0) == 17
    summary = json.loads((out / "summary.json").read_text())
    assert summary["trace"]["sent"] == 40 and summary["totals"]["open_loop"]["sent"] == 40
    assert summary["totals"]["requests"] == 40 and summary["llm"]["requests"] == 40


def test_prompts_are_exact_under_a_tokenizer(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=300, show_progress=False,
                                             initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([" ".join(WORDS), "prefix caching serves shared prompts faster"] * 20, trainer)
    tok.save(str(tmp_path / "tokenizer.json"))
    path = write_trace(tmp_path / "t.jsonl", forty_rows()[:12])
    pool = build_pool(LlmSettings(trace=path, tokenizer=str(tmp_path)).check(), stream=True)
    counts = [len(tok.encode(parse_request(pool.invocation(i).body).prompt, add_special_tokens=False).ids)
              for i in range(12)]
    assert counts == [row.input_length for row in pool.trace.rows]
    # without it the word estimate's prompts count otherwise under this tokenizer: the tokenizer made the difference
    plain = build_pool(LlmSettings(trace=path).check(), stream=True)
    assert any(len(tok.encode(parse_request(plain.invocation(i).body).prompt, add_special_tokens=False).ids)
               != plain.trace.rows[i].input_length for i in range(12))


def test_a_trace_is_sent_as_it_is(tmp_path, capsys):
    path = write_trace(tmp_path / "t.jsonl", forty_rows()[:3])
    out = tmp_path / "run"
    base = ["run", "--endpoint-name", "ep", "--endpoint-url", "http://127.0.0.1:9", "--out", str(out),
            "--trace", path]
    for extra, needle in ((["--split", "2"], "drop --split"),
                          (["--target-models", "uniform:3"], "drop --target-models / --inference-components"),
                          (["--async-input-location", "s3://bucket/in.json"], "drop --async-input-location")):
        code = main(base + extra)
        lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1 and "--trace sends each traced request once" in lines[0], (extra, lines)
        assert needle in lines[0]
    assert not out.exists()
