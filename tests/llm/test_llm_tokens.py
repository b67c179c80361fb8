"""Token accounting (sm_locust.llm.tokens): each stream format with and without the server's counts,
lines split across PayloadParts, non-streamed answers, per-token timing, length distributions."""

from __future__ import annotations

import json
import random

import pytest

from sm_locust.errors import UsageError
from sm_locust.llm.lengths import LengthDistribution
from sm_locust.llm.tokens import (
    COUNTED,
    OPENAI,
    SERVER,
    TGI,
    StreamTokens,
    count_response,
    count_stream,
    estimate_tokens,
    response_figures,
    stream_figures,
)


def tgi_sse(words, details=True, prompt=None):
    """TGI's generate_stream as the SageMaker TGI container streams it: SSE `data:` events."""
    parts = []
    for i, word in enumerate(words):
        last = i == len(words) - 1
        event = {"index": i + 1, "token": {"id": 100 + i, "text": word, "logprob": -0.1, "special": False},
                 "generated_text": "".join(words) if last else None, "details": None}
        if last and details:
            event["details"] = {"finish_reason": "length", "generated_tokens": len(words), "seed": None}
            if prompt is not None:
                event["details"]["prompt_tokens"] = prompt
        parts.append(b"data:" + json.dumps(event).encode() + b"\n\n")
    return parts


def lmi_lines(words, details=True):
    """LMI / DJL rolling-batch JSON lines: one `{"token": ...}` per line, details on the last."""
    parts = []
    for i, word in enumerate(words):
        line = {"token": {"id": [7 + i], "text": word, "log_prob": -0.2}}
        if i == len(words) - 1:
            line["generated_text"] = "".join(words)
            if details:
                line["details"] = {"finish_reason": "length", "generated_tokens": len(words), "inputs": "hi",
                                   "prefill": [{"id": 1, "text": "hi"}, {"id": 2, "text": "!"}]}
        parts.append(json.dumps(line).encode() + b"\n")
    return parts


def openai_sse(words, usage=True, prompt=11):
    """A vLLM / LMI chat-completions stream: role chunk, content deltas, finish, usage, [DONE]."""
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    events = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
    for word in words:
        events.append({**base, "choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}]})
    events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
    if usage:
        events.append({**base, "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": len(words),
                                                       "total_tokens": prompt + len(words)}})
    return [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events] + [b"data: [DONE]\n\n"]


WORDS = ["The", " cat", " sat", " on", " the", " mat"]


@pytest.mark.parametrize("make, fmt", [(tgi_sse, TGI), (lmi_lines, TGI), (openai_sse, OPENAI)])
def test_each_format_with_server_counts(make, fmt):
    count = count_stream(make(WORDS))
    assert count.format == fmt and count.counted == 6
    assert count.output_tokens == 6 and count.source == SERVER


@pytest.mark.parametrize("make, fmt", [(tgi_sse, TGI), (lmi_lines, TGI), (openai_sse, OPENAI)])
def test_each_format_counted_without_server_counts(make, fmt):
    parts = make(WORDS, details=False) if make is not openai_sse else make(WORDS, usage=False)
    count = count_stream(parts)
    assert count.format == fmt and count.server_output is None
    assert count.output_tokens == 6 and count.source == COUNTED


def test_server_count_wins_over_what_was_seen():
    parts = openai_sse(WORDS)
    parts[-2] = parts[-2].replace(b'"completion_tokens": 6', b'"completion_tokens": 9')  # chunks held several tokens
    count = count_stream(parts)
    assert (count.counted, count.output_tokens, count.source) == (6, 9, SERVER)


def test_input_tokens_from_the_server():
    assert count_stream(openai_sse(WORDS, prompt=17)).server_input == 17
    assert count_stream(tgi_sse(WORDS, prompt=5)).server_input == 5
    assert count_stream(lmi_lines(WORDS)).server_input == 2  # len(details.prefill)
    assert count_stream(tgi_sse(WORDS)).server_input is None


def test_per_part_counts_follow_the_part_a_line_ends_in():
    joined = b"".join(lmi_lines(WORDS[:3], details=False))
    cut = [joined[:10], joined[10:70], joined[70:]]  # lines split across parts
    count = count_stream(cut)
    assert count.counted == 3 and len(count.per_part) == 3
    one_line = len(lmi_lines(WORDS[:3], details=False)[0])
    # complete JSON, no newline yet
    assert count_stream([joined[:one_line - 1], joined[one_line - 1:]]).per_part[0] == 1
    many = count_stream([b"".join(tgi_sse(WORDS, details=False))])  # several events in one part
    assert many.per_part == [6]


def test_lmi_id_lists_and_concatenated_objects():
    assert count_stream([b'{"token": {"id": [1, 2, 3], "text": "abc"}}\n']).counted == 3
    assert count_stream([b'{"token": {"id": 1}}{"token": {"id": 2}}']).counted == 2  # no newline at all


def test_unrecognised_stream():
    count = count_stream([b"0.1 0.2 0.3\n", b"plain text"])
    assert count.format is None and count.output_tokens is None and count.source is None
    assert count_stream([b'{"predictions": [0.1]}\n']).source is None


def test_sse_framing_is_ignored():
    parts = [b": keep-alive\n", b"event: message\nid: 3\n", b'data: {"choices": [{"index": 0, "text": "hi"}]}\n\n',
             b"data: [DONE]"]
    count = count_stream(parts)
    assert (count.format, count.counted, count.per_part) == (OPENAI, 1, [0, 0, 1, 0])


def test_incremental_feed_returns_tokens_per_part():
    parser = StreamTokens()
    assert [parser.feed(p) for p in lmi_lines(WORDS[:2])] == [1, 1]
    assert parser.finish().counted == 2


def test_non_streamed_answers():
    openai = {"id": "x", "object": "chat.completion",
              "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello there"}}],
              "usage": {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21}}
    count = count_response(json.dumps(openai).encode())
    assert (count.output_tokens, count.server_input, count.source) == (12, 9, SERVER)
    tgi = [{"generated_text": "Hello there, friend", "details": {"finish_reason": "length", "generated_tokens": 5}}]
    assert (count_response(json.dumps(tgi).encode()).output_tokens,
            count_response(json.dumps(tgi).encode()).source) == (5, SERVER)
    plain = count_response(b'{"generated_text": "Hello there, friend"}')
    assert (plain.output_tokens, plain.source, plain.format) == (4, COUNTED, TGI)
    no_usage = {"choices": [{"index": 0, "message": {"content": "one two three"}}]}
    assert count_response(json.dumps(no_usage).encode()).output_tokens == 3
    assert count_response(b'{"predictions": [0.5]}').source is None
    assert count_response(b"not json").source is None


def test_estimate_tokens():
    assert estimate_tokens("Hi, there!") == 4
    assert estimate_tokens("") == 0


def test_stream_figures_from_known_timing():
    # parts: role-only chunk at 100 ms, then tokens at 150, 170, 190 ms, then a 2-token part at 230 ms
    count = count_stream([b'data: {"choices": [{"delta": {"role": "assistant", "content": ""}}]}\n\n',
                          b'data: {"choices": [{"delta": {"content": "a"}}]}\n\n',
                          b'data: {"choices": [{"delta": {"content": "b"}}]}\n\n',
                          b'data: {"choices": [{"delta": {"content": "c"}}]}\n\n',
                          b'{"token": {"id": [1, 2]}}\n'])
    figures = stream_figures(count, 100.0, [50.0, 20.0, 20.0, 40.0], e2e_ms=240.0, input_tokens=30)
    assert figures.ttft_ms == 150.0  # the first part carrying a token, not the role-only chunk
    assert figures.itl_ms == [20.0, 20.0, 20.0, 20.0]  # 40 ms over the 2 tokens of the last part
    assert figures.output_tokens == 5 and figures.input_tokens == 30 and figures.source == COUNTED
    assert figures.tpot_ms == pytest.approx((240.0 - 150.0) / 4)
    assert figures.output_tokens_per_s == pytest.approx(5 / 0.24)


def test_stream_figures_of_an_unrecognised_stream_keep_the_timing():
    figures = stream_figures(count_stream([b"x", b"y"]), 10.0, [5.0], e2e_ms=20.0)
    assert figures.ttft_ms is None and figures.itl_ms == [] and figures.output_tokens is None and figures.e2e_ms == 20.0
    assert response_figures(count_response(b'{"generated_text": "a b"}'), 50.0, 7).input_tokens == 7


def test_length_distributions():
    rng = random.Random(1)
    assert LengthDistribution.parse("128").sample(rng) == 128
    uniform = LengthDistribution.parse("64-256")
    assert all(64 <= uniform.sample(rng) <= 256 for _ in range(200)) and uniform.mean == 160
    normal = LengthDistribution.parse("128~32")
    draws = [normal.sample(rng) for _ in range(2000)]
    assert min(draws) >= 1 and abs(sum(draws) / len(draws) - 128) < 4
    for bad in ("abc", "0", "9-3", "5~-1", "1.5"):
        with pytest.raises(UsageError, match="token length|at least|LOW-HIGH|sd"):
            LengthDistribution.parse(bad, "--llm-output-tokens")
