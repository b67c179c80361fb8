"""Token accounting (sm_locust.llm.tokens): each stream format with and without the server's counts,
lines split across PayloadParts, non-streamed answers, per-token timing, length distributions."""

from __future__ import annotations

import json
import random

import pytest

from sm_locust.errors import UsageError
from sm_locust.invocation import InvocationError
from sm_locust.llm.errors import FINISH_REASON_ERROR, GENERIC, LMI_ERROR, OPENAI_ERROR, in_band_error
from sm_locust.llm.lengths import LengthDistribution
from sm_locust.llm.tokens import (
    COUNTED,
    OPENAI,
    SAME_WRITE_MS,
    SERVER,
    TGI,
    StreamTokens,
    count_response,
    count_stream,
    estimate_tokens,
    response_figures,
    spread,
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


@pytest.mark.parametrize("obj, code, message", [
    ({"error": "Request failed during generation: OOM", "error_type": "generation"}, "TGI.generation",
     "Request failed during generation: OOM"),
    ({"error": "x", "error_type": "tool error; rm -rf"}, "TGI.tool_error_rm_rf", "x"),  # an untrusted kind, cleaned
    ({"token": {"id": -1, "text": "", "error_msg": "exception occurred"}, "details": {"finish_reason": "error"}},
     LMI_ERROR, "exception occurred"),
    ({"token": {"id": -1, "text": "", "logprob": -1, "special": True}, "details": {"finish_reason": "error"}},
     LMI_ERROR, "the generation failed (finish_reason error)"),
    ({"body": {"generation": ""}, "error": {"error_code": 400, "error_msg": "bad"}}, LMI_ERROR, "(status 400) bad"),
    ({"error": {"message": "Internal server error", "type": "InternalServerError", "param": None, "code": 500}},
     "OpenAI.InternalServerError", "(status 500) Internal server error"),
    ({"error": {"message": "failed", "http_status_code": 422}}, OPENAI_ERROR, "(status 422) failed"),
    ({"choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}]}, FINISH_REASON_ERROR,
     "a choice finished with finish_reason \"error\""),
    ({"error": "something"}, GENERIC, "something"),
])
def test_in_band_errors_are_named_by_their_format(obj, code, message):
    error = in_band_error(obj)
    assert error is not None and (error.code, error.message) == (code, message)
    assert str(InvocationError(error.code, error.message)) == f"{code}: {message}"


def test_ordinary_events_are_not_errors():
    for obj in ({"token": {"id": 5, "text": " a"}, "details": {"finish_reason": "length"}},
                {"choices": [{"delta": {"content": "a"}, "finish_reason": "stop"}]}, {"error": None}, [1], "x",
                {"token": {"id": -1, "text": ""}}):  # id -1 alone (no error message, no error finish) is not one
        assert in_band_error(obj) is None


def test_an_error_line_is_never_a_token_and_only_the_first_error_is_kept():
    parser = StreamTokens()
    assert parser.feed(b'{"token": {"id": 1, "text": "a"}}\n') == 1
    assert parser.feed(b'{"token": {"id": -1, "text": "", "error_msg": "first"}, "details": {"finish_reason": '
                       b'"error"}}\ndata: {"error": {"message": "second"}}\n') == 0
    count = parser.finish()
    assert count.counted == 1 and count.error.code == LMI_ERROR and count.error.message == "first"


def test_spread_gives_the_server_surplus_in_proportion_to_the_tokens_seen():
    assert spread([0, 1, 1, 1, 1], 8) == [0, 2, 2, 2, 2]
    assert spread([1, 0, 2, 1], 8) == [2, 0, 4, 2]
    assert sum(spread([1, 1, 1], 7)) == 7 and all(n >= 1 for n in spread([1, 1, 1], 7))
    assert spread([1, 2], None) == [1, 2] and spread([1, 2], 2) == [1, 2] and spread([0, 0], 5) == [0, 0]


def test_a_chunk_of_two_tokens_with_the_server_count_gives_two_half_gaps():
    """Two chunks of 2 tokens each (vLLM stream interval), 50 ms apart; the usage says 4: ITL 25, 25."""
    parts = [b'data: {"choices": [{"delta": {"content": "a b"}}]}\n\n',
             b'data: {"choices": [{"delta": {"content": " c d"}, "finish_reason": "length"}]}\n\n',
             b'data: {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}}\n\n']
    figures = stream_figures(count_stream(parts), 100.0, [50.0, 0.1], e2e_ms=160.0)
    assert figures.ttft_ms == 100.0 and figures.itl_ms == [25.0, 25.0] and figures.output_tokens == 4
    assert figures.token_times_ms == [100.0, 100.0, 150.0, 150.0]


def test_parts_of_one_write_share_its_gap():
    """A write of 2 tokens that the transport split into 2 parts arriving together: two 12.5-ms gaps, not 25
    and 0."""
    parts = [b'{"token": {"id": 1, "text": "a"}}\n', b'{"token": {"id": 2, "text": "b"}}\n',
             b'{"token": {"id": 3, "text": "c"}}\n']
    figures = stream_figures(count_stream(parts), 100.0, [25.0, SAME_WRITE_MS / 10], e2e_ms=130.0)
    assert figures.ttft_ms == 100.0 and figures.itl_ms == pytest.approx([12.55, 12.55])
    apart = stream_figures(count_stream(parts), 100.0, [25.0, 25.0], e2e_ms=160.0)
    assert apart.itl_ms == [25.0, 25.0]


def test_continuous_usage_counts_each_chunk_by_the_running_count():
    """vLLM's continuous_usage_stats: usage on every chunk from the role chunk on; a chunk's tokens are the
    running count's increase. A server that puts its final usage on the last content chunk instead (after
    tokens were counted) is read as a final count, not as that chunk's tokens."""
    def chunk(content, completion):
        return (b'data: {"choices": [{"delta": {"content": "%s"}}], "usage": {"prompt_tokens": 2, '
                b'"completion_tokens": %d}}\n\n' % (content.encode(), completion))

    running = StreamTokens()
    per_part = [running.feed(p) for p in (chunk("", 0), chunk("a b", 2), chunk("c", 3), chunk("d e f", 6))]
    assert per_part == [0, 2, 1, 3] and running.finish().output_tokens == 6
    final = StreamTokens()
    per_part = [final.feed(p) for p in (b'data: {"choices": [{"delta": {"content": "a"}}]}\n\n',
                                        b'data: {"choices": [{"delta": {"content": "b"}}]}\n\n', chunk("c", 3))]
    count = final.finish()
    assert per_part == [1, 1, 1] and count.counted == 3 and count.server_output == 3


def test_the_stop_token_of_an_empty_finishing_delta_counts():
    """vLLM and LMI stream the stop token as empty content with the finish reason (and count it); OpenAI's
    bare `delta: {}` finishing chunk carries none."""
    empty = count_stream([b'data: {"choices": [{"delta": {"content": "a"}}]}\n\n',
                          b'data: {"choices": [{"delta": {"content": ""}, "finish_reason": "stop"}]}\n\n'])
    bare = count_stream([b'data: {"choices": [{"delta": {"content": "a"}}]}\n\n',
                         b'data: {"choices": [{"delta": {}, "finish_reason": "stop"}]}\n\n'])
    assert (empty.counted, bare.counted) == (2, 1)


def test_tgi_input_length_and_token_ids_lists():
    count = count_stream([b'data:{"index":1,"token":{"id":5,"text":" a","logprob":-0.5,"special":false},'
                          b'"generated_text":" a","details":{"finish_reason":"length","generated_tokens":1,"seed":null,'
                          b'"input_length":9}}\n\n'])
    assert count.server_input == 9 and count.server_output == 1
    ids = count_stream([b'data: {"choices": [{"delta": {"content": "ab"}, "token_ids": [4, 5]}]}\n\n'])
    assert ids.counted == 2
