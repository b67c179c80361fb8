"""The local endpoint's LLM emulation (sm_locust.endpoint.llm): the batching model and its predictions
(pure, on a virtual clock), the request / answer formats, and the served endpoint streaming tokens
as the batch makes them in both formats."""

from __future__ import annotations

import json
import time

import locust  # noqa: F401  (gevent monkey-patching before botocore)
from locust.env import Environment

import orjson
import pytest

from sm_locust.cli import main
from sm_locust.endpoint.llm import (
    IN_BAND,
    BatchModel,
    ContinuousBatcher,
    LlmConfig,
    LlmEngine,
    Sequence,
    simulate,
    stream_fault,
)
from sm_locust.endpoint.llm_wire import LMI, OPENAI, TGI, BadLlmRequest, Formatter, parse_request
from sm_locust.endpoint.server import LocalEndpoint
from sm_locust.invocation import Invocation
from sm_locust.llm.tokens import SERVER, count_response, count_stream, stream_figures
from sm_locust.record.llm import token_accounting
from sm_locust.transport import create_client

MODEL = BatchModel(max_sequences=8, step_ms=20.0, step_ms_per_seq=1.0, prefill_ms_per_token=0.05)


def test_step_time_grows_with_sequences_and_prefill():
    assert MODEL.step_s(1) == pytest.approx(0.021)
    assert MODEL.step_s(8) == pytest.approx(0.028)
    assert MODEL.step_s(8, prefill_tokens=200) == pytest.approx(0.038)


def test_throughput_grows_to_the_cap_then_flattens():
    rates = [MODEL.tokens_per_s(u, 100, 50) for u in (1, 2, 4, 8, 16, 32)]
    assert rates == sorted(rates) and rates[3] == rates[4] == rates[5] == MODEL.capacity(100, 50)
    assert MODEL.knee_users(100, 50) == 8
    assert MODEL.knee_users(100, 50, idle_s=0.03) == 8  # 50-token answers: one step idle changes little
    assert MODEL.knee_users(100, 4, idle_s=0.06) > 8  # 4-token answers idle for 2 steps: more users fill the batch
    assert MODEL.tokens_per_s(4, 100, 50, idle_s=0.03) < MODEL.tokens_per_s(4, 100, 50)
    assert MODEL.capacity(100, 50) == pytest.approx(8 / (0.020 + 8 * (0.001 + 0.05e-3 * 100 / 50)))


@pytest.mark.parametrize("users", [1, 4, 8, 12, 24])
def test_simulation_matches_the_model(users):
    sim = simulate(MODEL, users, prompt_tokens=100, output_tokens=50, duration_s=120.0, warmup_s=10.0)
    assert sim.tokens_per_s == pytest.approx(MODEL.tokens_per_s(users, 100, 50), rel=0.03)
    assert sim.mean_itl_ms == pytest.approx(MODEL.itl_ms(users, 100, 50), rel=0.05)
    low, high = MODEL.ttft_bounds_ms(users, 100, 50)
    assert low * 0.95 - 1 <= sim.mean_ttft_ms <= high * 1.05 + 1
    # the client's turnaround
    gapped = simulate(MODEL, users, 100, 50, duration_s=120.0, warmup_s=10.0, client_gap_s=0.003)
    assert low * 0.95 - 1 <= gapped.mean_ttft_ms <= high * 1.05 + 1


def test_queueing_beyond_the_cap_raises_ttft_not_itl():
    at_cap = simulate(MODEL, 8, 100, 50, 60.0, 5.0)
    over = simulate(MODEL, 16, 100, 50, 60.0, 5.0)
    assert over.mean_ttft_ms > 10 * at_cap.mean_ttft_ms  # waiting for a slot
    assert over.mean_itl_ms == pytest.approx(at_cap.mean_itl_ms, rel=0.02)
    assert over.tokens_per_s == pytest.approx(at_cap.tokens_per_s, rel=0.02)


def test_scheduler_admits_fifo_up_to_the_cap_and_drops_cancelled():
    batcher = ContinuousBatcher(BatchModel(2, 10.0, 1.0, 0.0))
    seqs = [Sequence(10, 2, arrived=i) for i in range(4)]
    for s in seqs:
        batcher.submit(s)
    step = batcher.plan()
    assert step.sequences == seqs[:2] and step.admitted == seqs[:2] and step.duration_s == pytest.approx(0.012)
    batcher.cancel(seqs[2])
    assert batcher.finish(step, 1.0) == []
    step = batcher.plan()
    assert step.admitted == [] and batcher.finish(step, 2.0) == seqs[:2]
    step = batcher.plan()
    assert step.sequences == [seqs[3]] and seqs[3].first_token_at is None
    batcher.finish(step, 3.0)
    assert seqs[3].first_token_at == 3.0


def test_requests_of_both_schemas():
    tgi = parse_request(b'{"inputs": "one two three", "parameters": {"max_new_tokens": 7}}')
    assert (tgi.format, tgi.prompt_tokens, tgi.max_new_tokens, tgi.stream_usage, tgi.details) == (TGI, 3, 7, False,
                                                                                                 False)
    assert parse_request(b'{"inputs": "x", "parameters": {"details": true}}').details is True
    chat = parse_request(json.dumps({"messages": [{"role": "user", "content": "a b"}], "max_tokens": 5, "stream": True,
                                     "stream_options": {"include_usage": True}}).encode())
    assert (chat.format, chat.prompt_tokens, chat.max_new_tokens, chat.stream_usage) == (OPENAI, 2, 5, True)
    for bad in (b"", b"[1]", b'{"instances": []}', b'{"inputs": "x", "parameters": {"max_new_tokens": 0}}'):
        with pytest.raises(BadLlmRequest):
            parse_request(bad)


TGI_BODY = b'{"inputs": "hi there", "parameters": {"max_new_tokens": 5, "details": true}}'


@pytest.mark.parametrize("body, fmt", [(TGI_BODY, TGI), (TGI_BODY, LMI),
                                       ((b'{"messages": [{"role": "user", "content": "hi there"}], "max_tokens": 5, '
                                         b'"stream_options": {"include_usage": true}}'), OPENAI)])
@pytest.mark.parametrize("server_counts", [True, False])
def test_answers_read_back_by_the_token_accounting(body, fmt, server_counts):
    request = parse_request(body)
    stream = Formatter(fmt, request, 5, server_counts)
    count = count_stream([stream.token(i) for i in range(5)])
    assert count.format == (TGI if fmt == LMI else fmt) and count.counted == 5 and count.output_tokens == 5
    assert count.source == ("server" if server_counts else "counted")
    assert count.server_input == (2 if server_counts and fmt != LMI else None)  # LMI's details carry no prompt count
    whole = count_response(Formatter(fmt, request, 5, server_counts).body())
    assert whole.output_tokens == 5


def test_config_flags_round_trip_and_bad_values_are_one_line(capsys):
    config = LlmConfig(max_sequences=4, step_ms=5.0, output_tokens="8-16", format="lmi", server_counts=False,
                       error_ratio=0.25)
    flags = config.flags()
    assert flags[0] == "--llm" and "--llm-max-sequences" in flags and "--llm-server-counts" in flags
    import argparse

    from sm_locust.cli.serve import config_from_args

    parser = argparse.ArgumentParser()
    from sm_locust.cli.serve import add_parser

    add_parser(parser.add_subparsers())
    args = parser.parse_args(["serve", *flags])
    assert config_from_args(args).llm == config
    assert main(["serve", "--llm", "--llm-max-sequences", "0"]) == 2
    assert "--llm-max-sequences must be at least 1" in capsys.readouterr().err
    assert main(["serve", "--llm-step-ms", "3"]) == 2
    assert "add --llm" in capsys.readouterr().err
    assert main(["serve", "--llm", "--llm-error-ratio", "1.5"]) == 2
    assert "--llm-error-ratio must be between 0 and 1" in capsys.readouterr().err
    assert main(["serve", "--llm", "--llm-error-ratio", "0.6", "--stream-error-ratio", "0.6"]) == 2
    assert "--stream-error-ratio and --llm-error-ratio add up to 1.2" in capsys.readouterr().err


def test_a_stream_fault_is_forced_or_drawn_against_both_ratios():
    engine = LlmEngine(LlmConfig(error_ratio=0.25))
    assert stream_fault(engine, "InternalStreamFailure", 0.5, lambda: 0.0) == "InternalStreamFailure"
    draws = {0.1: "ModelStreamError", 0.29: "ModelStreamError", 0.31: IN_BAND, 0.54: IN_BAND, 0.56: None}
    for draw, fault in draws.items():
        assert stream_fault(engine, None, 0.3, lambda d=draw: d) == fault
    assert stream_fault(LlmEngine(LlmConfig()), None, 0.0, lambda: 1 / 0) is None  # no draw without a ratio


STEP_MS, PER_SEQ_MS, CAP = 15.0, 1.0, 2


@pytest.fixture(scope="module")
def llm_endpoint(tmp_path_factory):
    log = tmp_path_factory.mktemp("llm") / "endpoint.log"
    config = LlmConfig(max_sequences=CAP, step_ms=STEP_MS, step_ms_per_seq=PER_SEQ_MS, prefill_ms_per_token=0.0)
    with LocalEndpoint(llm=config, log_path=log) as ep:
        yield ep


@pytest.fixture(autouse=True)
def _credentials(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


@pytest.mark.e2e
@pytest.mark.parametrize("transport", ["fast", "boto3"])
@pytest.mark.parametrize("body", [{"inputs": "one two", "parameters": {"max_new_tokens": 12, "details": True},
                                   "stream": True},
                                  {"messages": [{"role": "user", "content": "one two"}], "max_tokens": 12,
                                   "stream": True, "stream_options": {"include_usage": True}}])
def test_the_endpoint_streams_tokens_one_step_apart(llm_endpoint, transport, body):
    client = create_client(transport, Environment(), "llm", endpoint_url=llm_endpoint.url)
    result = client.invoke_stream(Invocation(body=orjson.dumps(body)))
    assert result is not None
    count = count_stream(result.chunks)
    assert count.output_tokens == 12 and count.counted == 12 and count.source == SERVER and count.server_input == 2
    figures = stream_figures(count, result.ttft_ms, result.inter_chunk_ms, e2e_ms=1000.0)
    one_step = STEP_MS + PER_SEQ_MS
    # each token one decode step later: the last one read no sooner than 11 steps after the request was sent.
    # Measured from the send, not between chunks: a busy client may read several tokens in one chunk (fewer
    # gaps, each longer), or all twelve at once (seen beside a CPU hog: one read at 417 ms, no gap at all)
    assert len(figures.itl_ms) <= 11 and result.ttft_ms + sum(figures.itl_ms) >= 11 * one_step * 0.8


@pytest.mark.e2e
def test_queued_requests_wait_for_a_slot(llm_endpoint):
    import gevent

    client = create_client("fast", Environment(), "llm", endpoint_url=llm_endpoint.url)
    body = orjson.dumps({"inputs": "x", "parameters": {"max_new_tokens": 10}})
    results = [None] * (2 * CAP)
    starts = [0.0] * (2 * CAP)

    def one(i):
        starts[i] = time.perf_counter()  # as the greenlet runs: a CPU hog that delays every start alike cancels
        results[i] = client.invoke_stream(Invocation(body=body))

    gevent.joinall([gevent.spawn(one, i) for i in range(2 * CAP)])
    firsts = sorted(start + r.ttft_ms / 1000.0 for start, r in zip(starts, results, strict=True))
    request_ms = 10 * (STEP_MS + CAP * PER_SEQ_MS)
    # CAP slots: of the first CAP + 1 first tokens, one is a request admitted once another ended, at least a whole
    # request (10 steps) after the first call started. Each first token is read when it came or later, so a
    # client stall lengthens this, never shortens it (measured from the first answer instead, CI read 107 ms:
    # the first answer's token read at 166 ms, the client stalled, and the second wave's at 272 ms)
    assert (firsts[CAP] - min(starts)) * 1000.0 > request_ms * 0.8, (starts, firsts)


@pytest.mark.e2e
def test_invoke_endpoint_and_bad_bodies(llm_endpoint):
    client = create_client("fast", Environment(), "llm", endpoint_url=llm_endpoint.url)
    answer = client.invoke(Invocation(body=b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}'))
    assert count_response(answer.body).output_tokens == 4
    assert orjson.loads(answer.body)["usage"]["completion_tokens"] == 4
    env = Environment()
    seen = []
    env.events.request.add_listener(lambda **kw: seen.append(kw))
    assert create_client("fast", env, "llm",
                         endpoint_url=llm_endpoint.url).invoke_stream(Invocation(body=b'{"instances": [1]}')) is None
    assert str(seen[-1]["exception"]).startswith("ModelError")


@pytest.mark.e2e
@pytest.mark.parametrize("fault, code, counter", [("InBandError", "TGI.generation", "in_band_errors"),
                                                  ("ModelStreamError", "ModelStreamError", "stream_errors"),
                                                  ("InternalStreamFailure", "InternalStreamFailure", "stream_errors")])
def test_a_forced_stream_fault_ends_the_stream_half_way_and_is_counted(llm_endpoint, fault, code, counter):
    """`sm-locust-fault=InBandError` ends a stream with its format's in-band error (TGI's error event here);
    ModelStreamError / InternalStreamFailure with SageMaker's exception frame, under --llm as without it."""
    env = Environment()
    seen = []
    env.events.request.add_listener(lambda **kw: seen.append(kw))
    client = create_client("fast", env, "llm", endpoint_url=llm_endpoint.url)
    call = token_accounting(client.invoke_stream, env)
    before = llm_endpoint.stats()
    body = b'{"inputs": "one two", "parameters": {"max_new_tokens": 6, "details": true}, "stream": true}'
    assert call(Invocation(body=body, custom_attributes=f"sm-locust-fault={fault}")) is None
    after = llm_endpoint.stats()
    stream = [e for e in seen if e["request_type"] == "InvokeEndpointWithResponseStream"]
    assert len(stream) == 1 and stream[0]["exception"].code == code
    assert after[counter] - before[counter] == 1 and after["successes"] == before["successes"]
    assert env.sm_locust_llm.window(0, 4e9).requests == 0  # the failed stream's 3 tokens were taken back
    assert sum(b.arrived for b in env.sm_locust_llm.buckets.values()) == 0
