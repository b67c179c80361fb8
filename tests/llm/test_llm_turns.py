"""`--turns N` (sm_locust.llm.conversation): each request carries the earlier turns, roles alternating,
the assistant's text what it streamed; the local endpoint counts the chats it receives
(`llm_wire.chat_counts`), and a run with `--turns 3` sends 1, 3 and 5 messages; summary.json's
`llm.turns` holds each turn index's figures with their intervals (sm_locust.record.llm)."""

from __future__ import annotations

import collections
import gzip
import json
import urllib.request
from collections import Counter

import orjson
import pytest

from sm_locust.endpoint.llm import LlmConfig
from sm_locust.endpoint.llm_wire import OPENAI, TGI, Formatter, LlmRequest, chat_counts, is_answer, parse_request
from sm_locust.errors import UsageError
from sm_locust.invocation import Invocation
from sm_locust.llm.conversation import Conversation, OpenConversations, answer_text, conversational
from sm_locust.llm.tokens import INPUT_TOKENS, SERVER, TURN, RequestTokens
from sm_locust.payloads.llm import LlmSettings, request_body
from sm_locust.record.llm import LlmStats
from sm_locust.record.model import Llm, LlmTurn, Summary
from sm_locust.report.llm import llm_rows, llm_view
from sm_locust.transport.contract import InvokeResult, StreamResult
from tests.conftest import run_cli


def body(text, system=False):
    messages = ([{"role": "system", "content": "Be brief."}] if system else []) + [{"role": "user", "content": text}]
    return orjson.dumps(request_body("messages", messages, 8, stream=True))


def streamed(fmt, length):
    """A StreamResult of the emulation's answer of `length` tokens in `fmt` (one chunk per token)."""
    request = LlmRequest(fmt, 3, length, stream_usage=True, details=True)
    formatter = Formatter(fmt, request, length, True)
    chunks = [formatter.token(i) for i in range(length)]
    return StreamResult(b"".join(chunks), "text/event-stream", None, chunks=chunks, ttft_ms=1.0, inter_chunk_ms=[])


def test_turns_carry_the_conversation_then_start_again():
    chat = Conversation(3)
    sent = []
    for turn, text in enumerate(["q1", "q2", "q3", "q4"], 1):
        out, number = chat.next_body(body(text, system=True))
        sent.append(orjson.loads(out)["messages"])
        chat.answered(f"a{turn}")
        assert number == (turn - 1) % 3 + 1
    assert [len(m) for m in sent] == [2, 4, 6, 2]  # a system message first, then 1, 3, 5 and 1
    assert [m["role"] for m in sent[2]] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert [m["content"] for m in sent[2]] == ["Be brief.", "q1", "a1", "q2", "a2", "q3"]
    failed = Conversation(3)
    failed.next_body(body("q1"))
    failed.answered(None)  # a failed turn: nothing to carry on from
    assert orjson.loads(failed.next_body(body("q2"))[0])["messages"] == [{"role": "user", "content": "q2"}]


@pytest.mark.parametrize("fmt", [OPENAI, TGI])
def test_the_answer_text_is_what_was_streamed(fmt):
    text = answer_text(streamed(fmt, 5))
    assert is_answer(text) and not is_answer(text + " extra") and not is_answer("")
    whole = json.dumps({"choices": [{"message": {"role": "assistant", "content": "Hi there"}}]}).encode()
    assert answer_text(InvokeResult(whole, "application/json", None)) == "Hi there"
    assert answer_text(None) is None


def test_conversational_call_sends_the_history_and_counts_it():
    seen = []

    def call(invocation):
        seen.append(invocation)
        return streamed(OPENAI, 4)

    send = conversational(call, 2)
    first = Invocation(body=body("one two"), extra={INPUT_TOKENS: 2})
    send(first)
    send(first)
    messages = [orjson.loads(i.body)["messages"] for i in seen]
    assert [len(m) for m in messages] == [1, 3] and is_answer(messages[1][1]["content"])
    assert seen[1].extra[INPUT_TOKENS] == 2 + 4 + 2 and first.extra[INPUT_TOKENS] == 2  # the pool's is left alone
    assert [i.extra[TURN] for i in seen] == [1, 2] and TURN not in first.extra


def turn_sample(turn, second, i):
    """Turn k's answer: its prompt 100 k tokens, TTFT 40 k ms (+0..20 by the answer), ITL 10 k ms, e2e 200 k."""
    return RequestTokens(e2e_ms=200.0 * turn, ttft_ms=40.0 * turn + 10.0 * ((second + i) % 3),
                         itl_ms=[10.0 * turn] * 4, output_tokens=5, input_tokens=100 * turn, source=SERVER)


def test_each_turn_gets_its_own_figures_and_intervals():
    t0, stats = 1_000_000, LlmStats()
    for second in range(t0, t0 + 20):  # every second: 4 first turns, 3 second ones, 2 third ones
        for turn, count in ((1, 4), (2, 3), (3, 2)):
            for i in range(count):
                stats.add(turn_sample(turn, second, i), now=second + 0.5, turn=turn)
    stats.add(turn_sample(1, t0, 0), now=t0 + 0.5)  # a request outside any conversation: the run's, no turn's
    llm = Summary.of(stats.annotate({"steps": []}, [], t0, t0 + 20)).llm
    assert llm is not None and llm.turns is not None and llm.requests == 20 * 9 + 1
    turns = llm.turns
    assert [t.turn for t in turns] == [1, 2, 3] and [t.requests for t in turns] == [80, 60, 40]
    assert [t.input_tokens_mean for t in turns] == [100.0, 200.0, 300.0]
    assert [t.itl_p50_ms for t in turns] == [10.0, 20.0, 30.0] and [t.e2e_p95_ms for t in turns] == [200, 400, 600]
    assert turns[0].ttft_p95_ms < turns[1].ttft_p50_ms < turns[2].ttft_p50_ms  # TTFT grows with the context
    for turn in turns:
        for key in ("ttft_p50_ms", "ttft_p95_ms", "itl_p50_ms", "itl_p95_ms", "e2e_p50_ms", "e2e_p95_ms"):
            low, high = turn.interval(key)
            assert low <= getattr(turn, key) <= high, (turn.turn, key)
        assert turn.interval("itl_p95_ms") == (10.0 * turn.turn,) * 2  # no spread, no width
    low, high = turns[0].interval("ttft_p50_ms")
    assert 40.0 <= low <= high <= 60.0
    again = Llm.from_json(llm.to_json())  # the typed record reads back what it wrote
    assert again.turns == turns and LlmTurn.from_json(turns[2].to_json()).input_tokens_mean == 300.0


def test_worker_turns_reach_the_master_and_the_report():
    worker, master = LlmStats(), LlmStats()
    for turn in (1, 2):
        worker.add(turn_sample(turn, 0, 0), now=1000.5, turn=turn)
    data: dict = {}
    worker._on_report_to_master("w1", data)
    assert worker.turns[1].buckets == {}
    master._on_worker_report("w1", json.loads(json.dumps(data)))  # keys become text on some wires
    master._on_worker_report("w2", data)
    summary = master.annotate({"steps": []}, [], 999.0, 1001.0)
    assert [(t["turn"], t["requests"]) for t in summary["llm"]["turns"]] == [(1, 2), (2, 2)]
    rows = dict(llm_rows(llm_view(summary, None), {}))
    assert rows["Turn 2 of 2"].startswith("2 answers, 200 prompt tokens; TTFT p50 / p95 80")


def test_the_endpoint_counts_chats():
    three = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": " the a"},
                          {"role": "user", "content": "q"}]}
    assert chat_counts(parse_request(orjson.dumps(three))) == {
        "llm_messages_3": 1, "llm_roles_alternating": 1, "llm_assistant_messages": 1, "llm_assistant_echoed": 1}
    broken = {"messages": [{"role": "user", "content": "q"}, {"role": "user", "content": "q"}]}
    assert chat_counts(parse_request(orjson.dumps(broken))) == {"llm_messages_other": 1}
    assert chat_counts(parse_request(orjson.dumps({"inputs": "x"}))) == {}


def test_turns_need_the_messages_template():
    with pytest.raises(UsageError, match="--turns 3 makes conversations of chat messages; pass --llm-template"):
        LlmSettings("synthetic:8", turns=3).check()
    with pytest.raises(UsageError, match="--turns shapes LLM requests"):
        LlmSettings(turns=3).check()
    assert LlmSettings("synthetic:8", "messages", turns=3).check().turns == 3


def test_open_loop_arrivals_take_up_the_conversation_answered_longest_ago():
    """No user holds a conversation in open loop: an arrival continues the conversation answered longest ago,
    else starts one; one waiting for its answer never sends; a failed or N-th turn ends it."""
    pending: list = []  # calls whose answers have not come back: answered when the test says

    def call(invocation):
        pending.append(invocation)
        return pending_answer.pop(0)

    pending_answer: list = []
    send = OpenConversations(call, 3)

    def arrive(answer):
        pending_answer.append(answer)
        send(Invocation(body=body(f"q{len(pending)}"), extra={}))
        return len(orjson.loads(pending[-1].body)["messages"]), pending[-1].extra[TURN]

    # each answer arrives before the next arrival: one conversation, 1, 3, 5 messages, then a new one
    assert [arrive(streamed(OPENAI, 2)) for _ in range(4)] == [(1, 1), (3, 2), (5, 3), (1, 1)]
    assert send.started == 2 and len(send.idle) == 1
    assert arrive(None) == (3, 2)  # the second conversation's turn 2 fails: it ends
    assert send.idle == collections.deque() and arrive(streamed(OPENAI, 2)) == (1, 1) and send.started == 3
    # every message list alternates and carries the answers it got
    for invocation in pending:
        roles = [m["role"] for m in orjson.loads(invocation.body)["messages"]]
        assert roles == ["user", "assistant"] * (len(roles) // 2) + ["user"]


def test_a_conversation_waiting_for_its_answer_is_not_taken_up():
    """An arrival while a conversation's turn is in flight starts another conversation; the one answered first
    is taken up first."""
    sent = []

    def call(invocation):
        sent.append(orjson.loads(invocation.body)["messages"])
        if len(sent) == 2:  # while conversation 1's second turn is in flight, another request arrives
            send(Invocation(body=body("meanwhile"), extra={}))
        return streamed(OPENAI, 1)

    send = OpenConversations(call, 3)
    send(Invocation(body=body("first"), extra={}))
    send(Invocation(body=body("second"), extra={}))
    assert [len(m) for m in sent] == [1, 3, 1] and send.started == 2 and len(send.idle) == 2
    send(Invocation(body=body("third"), extra={}))  # conversation 2 was answered first: its turn 2
    assert len(sent[3]) == 3 and sent[3][0]["content"] == "meanwhile" and sent[3][2]["content"] == "third"


def test_turns_with_the_async_shape_are_refused_in_one_line(tmp_path, capsys):
    """The async shape's calls are answered in S3, never to the caller: no answer to carry into the next turn."""
    from sm_locust.cli import main

    out = tmp_path / "run"
    code = main(["run", "--endpoint-name", "ep", "--endpoint-url", "http://127.0.0.1:9", "--out", str(out),
                 "--prompts", "synthetic:8", "--llm-template", "messages", "--turns", "3", "--shape", "async",
                 "--async-result", "s3", "--async-input-location", "s3://bucket/in.json"])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "--turns 3 carries each answer into the next turn" in lines[0], lines
    assert not out.exists()
    LlmSettings("synthetic:8", "messages", turns=3).check().check_load("open")  # open loop takes conversations up


@pytest.mark.e2e
def test_a_run_with_three_turns_sends_1_3_and_5_messages_and_counts_each_turn(endpoint_factory, tmp_path):
    users = 2
    ep = endpoint_factory(llm=LlmConfig(max_sequences=8, step_ms=10.0, step_ms_per_seq=1.0))
    out = tmp_path / "run"
    result = run_cli("run", "--endpoint-name", "llm", "--endpoint-url", ep.url, "--prompts", "synthetic:10",
                     "--llm-template", "messages", "--max-new-tokens", "6", "--stream", "true", "--turns", "3",
                     "-u", str(users), "-t", "5s", "--log-requests", "true", "--out", str(out), timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    with urllib.request.urlopen(f"{ep.url}/_sm_locust/stats", timeout=10) as answer:
        stats = json.loads(answer.read())
    ones, threes, fives = stats["llm_messages_1"], stats["llm_messages_3"], stats["llm_messages_5"]
    chats = ones + threes + fives
    assert fives >= 3 and stats["llm_messages_other"] == 0 and stats["llm_roles_alternating"] == chats
    assert ones >= threes >= fives >= ones - users  # each user: 1, 3, 5, 1, 3, 5, ...
    assert stats["llm_assistant_messages"] == threes + 2 * fives == stats["llm_assistant_echoed"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["totals"]["requests"] <= chats
    turns = Summary.from_json(summary).llm.turns  # each turn index counted apart, its prompt the whole chat so far
    assert [t.turn for t in turns] == [1, 2, 3]
    assert sum(t.requests for t in turns) == summary["llm"]["requests"]
    assert all(0 < t.requests <= stats[f"llm_messages_{2 * t.turn - 1}"] for t in turns)  # answered of received
    assert turns[0].input_tokens_mean < turns[1].input_tokens_mean < turns[2].input_tokens_mean
    assert turns[2].input_tokens_mean >= turns[0].input_tokens_mean + 2 * 6  # two answers of 6 tokens carried
    with gzip.open(out / "requests.jsonl.gz") as fh:  # each request's row says its turn
        rows = [json.loads(line) for line in fh]
    assert all(r["error"] is None for r in rows)
    assert Counter(r["turn"] for r in rows) == {t.turn: t.requests for t in turns}
    assert "turns 1-3: TTFT p95 " in result.stdout  # the closing lines say it too


@pytest.mark.e2e
def test_open_loop_arrivals_carry_conversations(endpoint_factory, tmp_path):
    """`--turns 3 --target-rps 10` against `serve --llm` counting the chats it receives: every arrival is a
    conversation's turn (1, 3 or 5 messages, roles alternating, each assistant message an answer it streamed),
    a turn only after the one before it, and the rate is the arrivals'."""
    ep = endpoint_factory(llm=LlmConfig(max_sequences=16, step_ms=5.0, step_ms_per_seq=0.1))
    out = tmp_path / "run"
    result = run_cli("run", "--endpoint-name", "llm", "--endpoint-url", ep.url, "--prompts", "synthetic:10",
                     "--llm-template", "messages", "--max-new-tokens", "4", "--stream", "true", "--turns", "3",
                     "--target-rps", "10", "-t", "5s", "--out", str(out), timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    with urllib.request.urlopen(f"{ep.url}/_sm_locust/stats", timeout=10) as answer:
        stats = json.loads(answer.read())
    ones, threes, fives = stats["llm_messages_1"], stats["llm_messages_3"], stats["llm_messages_5"]
    chats = ones + threes + fives
    assert fives >= 3 and stats["llm_messages_other"] == 0 and stats["llm_roles_alternating"] == chats
    assert ones >= threes >= fives  # a conversation's turn k + 1 only after its turn k
    assert stats["llm_assistant_messages"] == threes + 2 * fives == stats["llm_assistant_echoed"]
    summary = json.loads((out / "summary.json").read_text())
    assert chats <= summary["totals"]["open_loop"]["sent"]  # open loop: the arrivals, each one turn
