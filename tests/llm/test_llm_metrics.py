"""LLM figures (sm_locust.record.llm): TTFT, ITL and tokens/s measured on an in-process stream with
known timing, through both transports; buckets per second, per step and for the run; worker reports;
an unrecognised stream said once and still timed."""

from __future__ import annotations

import copy
import json
import logging
import time

import gevent
import locust  # noqa: F401  (gevent monkey-patching before botocore)
from locust.env import Environment

import pytest

from sm_locust.invocation import Invocation
from sm_locust.llm.tokens import COUNTED, INPUT_TOKENS, SERVER, RequestTokens
from sm_locust.measure.timeline import Second
from sm_locust.plateau.tokens import Bucket
from sm_locust.record.llm import LlmStats, step_windows, token_accounting
from sm_locust.record.summary import step_records
from sm_locust.transport import eventstream as es
from tests.fakes import FakeRuntime, recorded, signed_client

FIRST_MS, GAP_MS, TOKENS = 120.0, 25.0, 8


def openai_parts(n: int, usage: bool) -> list[bytes]:
    parts = [b'data: {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}\n\n']
    parts += [b'data: {"choices": [{"index": 0, "delta": {"content": " w%d"}}]}\n\n' % i for i in range(n)]
    if usage:
        parts.append(b'data: {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": %d}}\n\n' % n)
    return parts + [b"data: [DONE]\n\n"]


def timed_stream(parts, first_s: float, gap_s: float, token_parts: range):
    """A route that sends the role chunk at once, the token parts FIRST then GAP apart, the rest at once."""

    def handler(environ, body):
        def generate():
            for i, part in enumerate(parts):
                if i in token_parts:
                    gevent.sleep(first_s if i == token_parts.start else gap_s)
                yield es.encode_payload_part(part)

        return 200, [("Content-Type", es.CONTENT_TYPE)], generate()

    return handler


@pytest.fixture(scope="module")
def runtime():
    with FakeRuntime() as server:
        for name, usage in (("usage", True), ("counted", False)):
            server.routes[name] = timed_stream(openai_parts(TOKENS, usage), FIRST_MS / 1000, GAP_MS / 1000,
                                               range(1, TOKENS + 1))
        server.routes["plain"] = timed_stream([b"0.1", b"0.2", b"0.3"], 0.01, 0.01, range(3))
        more = openai_parts(TOKENS, True)
        more[-2] = more[-2].replace(b'"completion_tokens": %d' % TOKENS, b'"completion_tokens": 12')
        server.routes["more"] = timed_stream(more, 0.01, 0.01, range(1, TOKENS + 1))

        def broken(environ, body):
            parts = [es.encode_payload_part(p) for p in openai_parts(3, False)[:3]]
            return 200, [("Content-Type", es.CONTENT_TYPE)], [*parts, es.encode_exception("ModelStreamError", "boom")]

        server.routes["broken"] = broken
        yield server


@pytest.mark.e2e
@pytest.mark.parametrize("transport", ["fast", "boto3"])
@pytest.mark.parametrize("route, source", [("usage", SERVER), ("counted", COUNTED)])
def test_ttft_itl_and_tokens_per_s_of_a_stream_with_known_timing(runtime, transport, route, source):
    env = Environment()
    client = signed_client(transport, env, runtime.url, route)
    call = token_accounting(client.invoke_stream, env)
    invocation = Invocation(body=b"{}")
    invocation.extra[INPUT_TOKENS] = 30
    walls = []  # each call's own time, measured around it here: what the figures cannot exceed
    for _ in range(3):
        t0 = time.perf_counter()
        assert call(invocation) is not None
        walls.append((time.perf_counter() - t0) * 1000)
    stats = env.sm_locust_llm
    figures = stats.window(0, 4e9).figures(1.0)
    assert figures["requests"] == 3 and figures["output_tokens"] == 3 * TOKENS and figures["tokens_source"] == source
    assert figures["input_tokens"] == (27 if source == SERVER else 90)  # the server's 9 per answer win over our 30
    # the server's sleeps bound each figure from below, the call's own time from above (a busy machine
    # stretches both sides alike; how close to the sleeps a quiet one comes is not asserted)
    assert FIRST_MS <= figures["ttft_p50_ms"] <= figures["e2e_p50_ms"]
    assert GAP_MS - 3 <= figures["itl_p50_ms"] <= figures["itl_p95_ms"] <= max(walls)
    expected_e2e = FIRST_MS + (TOKENS - 1) * GAP_MS
    assert expected_e2e <= figures["e2e_p50_ms"] <= sorted(walls)[1] + 1  # the median call
    assert GAP_MS - 3 <= figures["tpot_p50_ms"] <= figures["e2e_p50_ms"] / (TOKENS - 1)
    rate = figures["request_output_tokens_per_s_p50"]
    assert TOKENS / (max(walls) / 1000) * 0.99 <= rate <= TOKENS / (expected_e2e / 1000) * 1.01
    assert figures["output_tokens_per_s"] == 3 * TOKENS  # over the 1-s window asked for


@pytest.mark.e2e
def test_an_unrecognised_stream_is_timed_and_said_once(runtime, caplog):
    env = Environment()
    call = token_accounting(signed_client("fast", env, runtime.url, "plain").invoke_stream, env)
    with caplog.at_level(logging.WARNING):
        results = [call(Invocation(body=b"{}")) for _ in range(2)]
    assert all(r is not None and len(r.chunks) == 3 for r in results)
    warnings = [r for r in caplog.records if "no recognisable tokens" in r.getMessage()]
    assert len(warnings) == 1
    bucket = env.sm_locust_llm.window(0, 4e9)
    assert bucket.unrecognised == 2 and bucket.figures(1.0) is None


def test_failed_calls_and_non_llm_answers_are_not_counted():
    env = Environment()
    call = token_accounting(lambda invocation: None, env)
    call(Invocation(body=b"{}"))
    answers = token_accounting(lambda invocation: type("R", (), {"body": b'{"generated_text": "a b c"}'})(), env,
                               responses=True)
    answers(Invocation(body=b"{}"))
    bucket = env.sm_locust_llm.window(0, 4e9)
    assert bucket.requests == 1 and bucket.output_tokens == 3 and bucket.source == COUNTED


def sample(ttft, itl, out, e2e, source=SERVER, inputs=10):
    return RequestTokens(e2e_ms=e2e, ttft_ms=ttft, itl_ms=itl, output_tokens=out, input_tokens=inputs, source=source)


def test_bucket_figures_and_mixed_sources():
    bucket = Bucket()
    for i in range(100):
        bucket.add(sample(100.0 + i, [20.0] * 9 + [40.0], 11, 400.0))
    figures = bucket.figures(10.0)
    assert figures["ttft_p50_ms"] in (149.0, 150.0) and figures["ttft_p99_ms"] in (198.0, 199.0)
    assert figures["itl_p50_ms"] == 20.0 and figures["itl_p95_ms"] == 40.0
    assert figures["output_tokens"] == 1100 and figures["input_tokens"] == 1000
    assert figures["tokens_source"] == SERVER
    bucket.add(sample(100.0, [], 1, 100.0, COUNTED, None))
    assert bucket.figures(1.0)["tokens_source"] == "mixed"
    assert Bucket().figures(1.0) is None


def test_worker_buckets_reach_the_master_once():
    worker, master = LlmStats(), LlmStats()
    worker.add(sample(100.0, [20.0], 2, 120.0), now=1000.2)
    worker.add(sample(200.0, [30.0], 2, 230.0), now=1001.7)
    data: dict = {}
    worker._on_report_to_master("w1", data)
    assert worker.buckets == {}
    wire = json.loads(json.dumps(data))  # keys become text on some wires
    master._on_worker_report("w1", wire)
    master._on_worker_report("w2", data)
    assert master.window(999, 1002).requests == 4
    assert master.window(1000, 1001).requests == 2  # the second 1000 only
    empty: dict = {}
    worker._on_report_to_master("w1", empty)
    assert empty == {}


def steady_timeline(t0: float, users_per_step=(2, 4), step_s=10):
    seconds, t = [], t0
    for users in users_per_step:
        for _ in range(step_s):
            t += 1.0
            seconds.append(Second(t=t, users=users, spawning=False, requests=10, failures=0, hist={50: 10}))
    return seconds


def test_step_figures_cover_each_steps_steady_window():
    t0 = 1_000_000.0
    seconds = steady_timeline(t0)
    stats = LlmStats()
    for second in range(int(t0), int(t0) + 20):  # 10 answers of 5 tokens every second; step 2 answers twice as fast
        for _ in range(10):
            fast = second >= t0 + 10
            stats.add(sample(50.0, [10.0 if fast else 20.0] * 4, 5, 100.0), now=second + 0.5)
    windows = step_windows(seconds)
    assert len(windows) == len(step_records(seconds)) == 2
    first = windows[0]
    assert (first[0].t - first[0].interval, first[-1].t, len(first)) == (t0 + 2, t0 + 10, 8)  # 20 % warm-up dropped
    summary = {"steps": step_records(seconds)}
    stats.annotate(summary, seconds, t0, t0 + 20)
    first, second = (s["llm"] for s in summary["steps"])
    assert first["output_tokens"] == 8 * 50 and first["output_tokens_per_s"] == 50.0 and first["itl_p50_ms"] == 20.0
    assert second["itl_p50_ms"] == 10.0
    assert summary["llm"]["output_tokens"] == 20 * 50 and summary["llm"]["output_tokens_per_s"] == 50.0


def test_the_runs_llm_figures_carry_their_intervals():
    t0 = 1_000_000.0
    seconds = steady_timeline(t0)
    stats = LlmStats()
    for second in range(int(t0), int(t0) + 20):  # answers of 5 tokens; TTFT 40, 50 or 60 ms; ITL 20 ms
        for i in range(10):
            stats.add(sample(40.0 + 10.0 * ((second + i) % 3), [20.0] * 4, 5, 100.0), now=second + 0.5)
    summary = {"steps": step_records(seconds)}
    llm = stats.annotate(summary, seconds, t0, t0 + 20)["llm"]
    ci = llm["ci95"]
    assert set(ci) == {"ttft_p50_ms", "ttft_p95_ms", "itl_p50_ms", "itl_p95_ms", "output_tokens_per_s"}
    for key in ("ttft_p50_ms", "ttft_p95_ms", "itl_p50_ms", "output_tokens_per_s"):
        low, high = ci[key]
        assert low <= llm[key] <= high, key
    assert ci["itl_p50_ms"] == [20.0, 20.0] and ci["output_tokens_per_s"] == [50.0, 50.0]  # no spread, no width
    assert 40.0 <= ci["ttft_p50_ms"][0] <= ci["ttft_p95_ms"][1] <= 60.0


def test_no_tokens_no_llm_object():
    summary = {"steps": []}
    assert "llm" not in LlmStats().annotate(summary, [], 0.0, 1.0)


def test_tokens_per_s_counts_each_streamed_token_in_the_second_it_arrived():
    stats = LlmStats()
    # one stream of 30 tokens from 1000.0 to 1003.0 (a token every 100 ms after a 100-ms TTFT), the server says 60
    times = [100.0 * (i + 1) for i in range(30)]
    stats.add(RequestTokens(3000.0, 100.0, [100.0] * 29, 60, None, SERVER, times), now=1003.0)
    assert [round(stats.buckets[s].arrived) for s in (1000, 1001, 1002)] == [18, 20, 20]  # 9, 10, 10 tokens x 2
    assert stats.window(1000, 1001).figures(1.0)["output_tokens_per_s"] == 18.0 and stats.window(1001,
                                                                                                 1002).requests == 0
    assert stats.window(999, 1004).figures(4.0)["output_tokens"] == 60
    stats.add(sample(None, [], 5, 50.0), now=1003.2)  # not streamed: all at completion
    assert stats.buckets[1003].arrived == 5 + 2  # the stream's last token (at 1003.0) too


def test_tokens_of_a_window_with_a_gap_and_fractional_edges():
    stats = LlmStats()
    stats.clock = lambda: 2000.0
    for second in range(1000, 1010):
        stats.add(sample(None, [], 10, 5.0), now=second + 0.5)  # 10 tokens in each second, at completion
    assert stats.window(1002.5, 1005.0).arrived == pytest.approx(25.0)  # 2.5 s of tokens
    stats.clock = lambda: 1009.25  # the current second is a quarter filled: its 10 tokens came in 0.25 s
    assert stats.window(1008.0, 1009.25).arrived == pytest.approx(20.0)
    window = [Second(t=1003.0, users=1, spawning=False, requests=0, failures=0),
              Second(t=1007.0, users=1, spawning=False, requests=0, failures=0)]  # two 1-s spans, 3 s apart
    bucket = stats.over(window)
    assert bucket.arrived == pytest.approx(20.0) and bucket.requests == 2


@pytest.mark.e2e
def test_streamed_tokens_count_as_they_arrive_and_failed_streams_give_them_back(runtime):
    env = Environment()
    client = signed_client("fast", env, runtime.url, "more")
    call = token_accounting(client.invoke_stream, env)
    assert client.chunk_listener == env.sm_locust_llm.on_chunk
    seen_live = []
    listener = client.chunk_listener
    def watching(payload):
        listener(payload)
        seen_live.append(sum(b.arrived for b in env.sm_locust_llm.buckets.values()))

    client.chunk_listener = watching
    events = recorded(env)
    assert call(Invocation(body=b"{}")) is not None, [str(e["exception"]) for e in events]
    assert seen_live[1:TOKENS + 1] == list(range(1, TOKENS + 1))  # one more token counted at each part, before the end
    stats = env.sm_locust_llm
    assert sum(b.arrived for b in stats.buckets.values()) == 12  # the server's 12, not the 8 seen
    assert stats.window(0, 4e9).output_tokens == 12 and stats._live == {}
    broken = signed_client("fast", env, runtime.url, "broken")
    assert token_accounting(broken.invoke_stream, env)(Invocation(body=b"{}")) is None
    assert sum(b.arrived for b in stats.buckets.values()) == 12 and stats.window(0, 4e9).requests == 1


def test_a_long_run_keeps_a_bounded_number_of_buckets_and_exact_run_figures():
    """Was: one bucket per second for the whole run (a 7-day soak: 604,800). Three hours of one answer a
    second: the last 10 minutes one by one, older minutes merged, older than 2 h merged into hours."""
    t0 = 1_000_000_020  # not on a minute boundary
    stats, reference = LlmStats(), Bucket()
    early = [Second(t=float(t0 + 100 + i), users=2, spawning=False, requests=1, failures=0) for i in range(60)]
    for i in range(3 * 3600):
        answer = sample(40.0 + i % 7, [10.0 + i % 3] * 4, 5, 90.0)
        stats.add(answer, now=t0 + i + 0.5)
        reference.add(answer)
        reference.arrived += 5  # not streamed: its tokens arrive at completion
        if i == 200:  # the first step, read while fresh and again once its seconds are merged
            read = stats.annotate({"steps": [{}]}, early, t0, t0 + i, windows=[early])
            fresh = copy.deepcopy(read["steps"][0]["llm"])
            assert {k: v for k, v in fresh.items() if k != "ci95"} == stats.over(early).figures(60.0)
            assert fresh["ci95"]["output_tokens_per_s"] is not None
    assert len(stats.buckets) <= 600 + 60 and len(stats.coarse) <= 2 * 60 + 2  # compacted once a minute
    summary = stats.annotate({"steps": [{}]}, early, t0, t0 + 3 * 3600, windows=[early])
    intervals = summary["llm"].pop("ci95")
    assert summary["llm"] == reference.figures(3 * 3600.0)  # the run: exact
    low, high = intervals["output_tokens_per_s"]  # merged minutes and hours are samples of their own length
    assert low <= 5.0 <= high and high - low < 0.5
    assert summary["steps"][0]["llm"] == fresh  # a settled step keeps what it measured
    recent = stats.window(t0 + 3 * 3600 - 100.0, t0 + 3 * 3600 - 40.0)
    assert recent.requests == 60 and recent.arrived == pytest.approx(300.0)
    old = stats.window(t0 + 5400.0, t0 + 9000.0)  # an hour of merged minutes (t0 is on a minute): exact at minute edges
    assert old.requests == 3600 and old.arrived == pytest.approx(5 * 3600.0)
    edge = stats.window(t0 + 5430.0, t0 + 9030.0)  # half a minute off: the edge minutes by their middle and share
    assert edge.requests == 3600 and edge.arrived == pytest.approx(5 * 3600.0)
