"""LLM streams as the containers send them: the client and the local endpoint against the same fixtures.

tests/fixtures/wire/{tgi,lmi,openai}/ hold byte-exact samples of TGI's, LMI's, vLLM's and TGI's
Messages API streams, clean and ending with each one's in-band error (docs/facts.md, "LLM
containers' streams", has each fact and its upstream source; each directory's expected.json says
what each sample carries: the tokens of each event, the server's counts, the error).

- the parser (`sm_locust.llm.tokens`) reads every sample under random PayloadPart cuts (mid-line,
  mid-UTF-8, several events in one part): the same tokens, counts and error whatever the cut;
- the whole client path (the contract's StreamMeasurement, the token accounting, Locust's request
  event), fed the samples with synthetic arrival times: requests equal the clean streams, failures
  equal the error streams and are named by the format's error, output tokens equal the clean
  streams' (+-2 %), TTFT / ITL p50 within 10 % of the truth;
- the local endpoint's formatter (`sm_locust.endpoint.llm_wire`) writes only events whose framing,
  JSON layout and key structure appear in its container's samples, and `serve --llm --llm-format X`
  does the same over HTTP (e2e), its failures equal to the streams its own counters say it ended
  with an in-band error.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterable
from pathlib import Path

import gevent
import locust  # noqa: F401  (gevent monkey-patching before botocore)
from locust.env import Environment

import orjson
import pytest

from sm_locust.endpoint.llm import LlmConfig
from sm_locust.endpoint.llm_wire import LMI, OPENAI, TGI, Formatter, parse_request
from sm_locust.endpoint.server import LocalEndpoint
from sm_locust.invocation import INVOKE_ENDPOINT_STREAM, Invocation
from sm_locust.llm.tokens import count_stream
from sm_locust.record.llm import token_accounting
from sm_locust.transport import create_client
from sm_locust.transport.contract import SageMakerClient

WIRE = Path(__file__).resolve().parents[1] / "fixtures" / "wire"
FAMILIES = {TGI: ("tgi", "*.sse"), LMI: ("lmi", "stream*.jsonl"), OPENAI: ("openai", "vllm_*.sse")}
"""The samples each emulated format must match: TGI's generate_stream, LMI's jsonlines, vLLM's chunks."""


def samples() -> list[tuple[str, bytes, dict]]:
    """(relative path, bytes, expectation) of every LLM stream sample."""
    out = []
    for folder in ("tgi", "lmi", "openai"):
        expected = json.loads((WIRE / folder / "expected.json").read_text())
        for name, facts in sorted(expected.items()):
            out.append((f"{folder}/{name}", (WIRE / folder / name).read_bytes(), facts))
    return out


SAMPLES = samples()


def events(raw: bytes) -> list[bytes]:
    """A stream's events, each with its framing: SSE blocks (`...\\n\\n`) or JSON lines (`...\\n`)."""
    separator = b"\n\n" if b"\n\n" in raw else b"\n"
    parts = raw.split(separator)
    assert parts[-1] == b"", "a stream ends with its separator"
    return [part + separator for part in parts[:-1]]


def _shape(value):
    if isinstance(value, dict):
        return ("{}", tuple((key, _shape(item)) for key, item in value.items()))
    if isinstance(value, list):
        return ("[]", tuple(_shape(item) for item in value))
    if isinstance(value, bool) or value is None:
        return type(value).__name__
    return "number" if isinstance(value, (int, float)) else type(value).__name__


def signature(event: bytes) -> tuple:
    """What a conforming event must share with a sample: its framing (SSE prefix, separator), its JSON
    layout (compact or spaced, as the container's serialiser writes it) and its key structure."""
    body = event.rstrip(b"\n")
    terminator = event[len(body):]
    if body.startswith(b":"):
        return ("comment", terminator)
    prefix = b""
    for candidate in (b"data: ", b"data:"):
        if body.startswith(candidate):
            prefix, body = candidate, body[len(candidate):]
            break
    if body == b"[DONE]":
        return ("done", prefix, terminator)
    obj = orjson.loads(body)
    if body == json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode():
        layout = "compact"
    elif body == json.dumps(obj, ensure_ascii=False).encode():
        layout = "spaced"
    else:
        layout = "other"
    return ("json", prefix, terminator, layout, _shape(obj))


def family(fmt: str) -> set[tuple]:
    folder, pattern = FAMILIES[fmt]
    return {signature(event) for path in (WIRE / folder).glob(pattern) for event in events(path.read_bytes())}


def conforms(raw: bytes, fmt: str) -> list[bytes]:
    """The events of `raw` whose signature no sample of `fmt` has (empty: it conforms)."""
    known = family(fmt)
    return [event for event in events(raw) if signature(event) not in known]


def cut(events_: list[bytes], times: list[float], rng: random.Random) -> list[tuple[bytes, float]]:
    """The stream re-cut into PayloadParts at random, as SageMaker relays what the container wrote: an
    event's bytes may be split anywhere (mid-line, mid-UTF-8: inside a multi-byte character), and events
    written at the same time may share a part; bytes written at different times never do. A part arrives
    when its bytes were written."""
    data = b"".join(events_)
    owner: list[int] = []
    for index, event in enumerate(events_):
        owner += [index] * len(event)
    cuts = set()
    for position in range(1, len(data)):
        before, after = owner[position - 1], owner[position]
        if before != after and times[before] != times[after]:
            cuts.add(position)
            continue
        chance = 0.5 if 0x80 <= data[position] <= 0xBF else 0.3 if before != after else 0.02
        if rng.random() < chance:
            cuts.add(position)
    edges = [0, *sorted(cuts), len(data)]
    return [(data[a:b], times[owner[b - 1]]) for a, b in zip(edges, edges[1:], strict=False)]


def timeline(tokens: list[int], rng: random.Random, gap_ms: float = 25.0) -> list[float]:
    """When each event was written (ms from the call's start): the first token after 80-200 ms (queue and
    prefill), the others a jittered decode step apart,
    a quarter of them in a burst with the one before (written at once); an event without tokens goes with
    the token event before it (usage, [DONE], an error), or the first one (a role chunk, a keep-alive)."""
    token_times: list[float] = []
    first_ms = now = rng.uniform(80.0, 200.0)
    for count in tokens:
        if not count:
            continue
        if token_times and rng.random() < 0.25:
            token_times.append(token_times[-1])
            continue
        if token_times:
            now += gap_ms * rng.uniform(0.8, 1.2)
        token_times.append(now)
    times, seen = [], 0
    for count in tokens:
        if count:
            seen += 1
        times.append(token_times[max(seen - 1, 0)] if token_times else first_ms)
    return times


def truth(tokens: list[int], times: list[float]) -> tuple[float, list[float]]:
    """TTFT and the per-token gaps the server wrote: the k tokens written at one time are k gaps of
    (that time - the previous write's) / k."""
    writes: dict[float, int] = {}
    for count, at in zip(tokens, times, strict=True):
        if count:
            writes[at] = writes.get(at, 0) + count
    ordered = sorted(writes.items())
    gaps: list[float] = []
    for (previous, _), (at, count) in zip(ordered, ordered[1:], strict=False):
        gaps += [(at - previous) / count] * count
    return ordered[0][0], gaps


def p50(values: Iterable[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


# -- the parser on the samples ------------------------------------------------------------------


@pytest.mark.parametrize("path, raw, facts", SAMPLES, ids=[s[0] for s in SAMPLES])
def test_each_sample_parses_the_same_under_random_cuts(path, raw, facts):
    parts = events(raw)
    assert len(parts) == len(facts["event_tokens"]), "expected.json lists each event's tokens"
    rng = random.Random(path)
    for _ in range(40):
        chunks = cut(parts, [0.0] * len(parts), rng)
        count = count_stream(payload for payload, _ in chunks)
        assert count.counted == facts["counted"], path
        assert (count.error.code if count.error else None) == facts["error"], path
        if facts["error"] is None:
            assert count.server_output == facts["server_output"] and count.server_input == facts["server_input"]
            assert count.output_tokens == (facts["server_output"] or facts["counted"])
        else:
            assert facts.get("message_contains", "") in count.error.message


def test_every_byte_of_the_samples_is_a_whole_event_and_the_error_event_is_the_last_bearing_one():
    for path, raw, facts in SAMPLES:
        assert b"".join(events(raw)) == raw, path
        if facts["error"]:
            last_tokens = max(i for i, n in enumerate(facts["event_tokens"]) if n)
            assert sum(facts["event_tokens"][last_tokens + 1:]) == 0, path


# -- the client path: contract + token accounting + Locust's request event ----------------------


class ReplayClient(SageMakerClient):
    """A transport that plays PayloadParts at given times (ms from the call's start), no network."""

    transport = "replay"

    def __init__(self, environment):
        super().__init__(environment, "llm")
        self.plans: list[list[tuple[bytes, float]]] = []

    def _invoke(self, invocation):
        raise NotImplementedError

    def _async(self, invocation, input_location):
        raise NotImplementedError

    def error(self, exc, url=None):
        raise exc

    def _stream(self, invocation, stream):
        stream.opened("text/event-stream", "AllTraffic")
        for payload, at_ms in self.plans.pop(0):
            stream.chunk(payload, stream.started + at_ms / 1000.0)


def test_requests_failures_tokens_and_latencies_equal_the_streams_sent():
    """The issue's "Done when", on every sample: 12 rounds of random cuts and jittered timing."""
    env = Environment()
    client = ReplayClient(env)
    call = token_accounting(client.invoke_stream, env)
    entries: list[dict] = []
    env.events.request.add_listener(lambda **kw: entries.append(kw))
    rng = random.Random(29)
    clean = errors = tokens = 0
    true_ttft: list[float] = []
    true_itl: list[float] = []
    names: dict[str, int] = {}
    for _ in range(12):
        for path, raw, facts in SAMPLES:
            parts = events(raw)
            times = timeline(facts["event_tokens"], rng)
            plan = cut(parts, times, rng)
            client.plans.append(plan)
            total_ms = plan[-1][1] + 5.0
            result = call(Invocation(body=b"{}"), started=time.perf_counter() - total_ms / 1000.0)
            if facts["error"]:
                errors += 1
                names[facts["error"]] = names.get(facts["error"], 0) + 1
                assert result is None, path
                continue
            clean += 1
            assert result is not None, path
            tokens += facts["server_output"] or facts["counted"]
            ttft, gaps = truth(facts["event_tokens"], times)
            true_ttft.append(ttft)
            true_itl += gaps
    streams = [e for e in entries if e["request_type"] == INVOKE_ENDPOINT_STREAM]
    failed = [e for e in streams if e["exception"] is not None]
    assert len(streams) - len(failed) == clean and len(failed) == errors
    seen: dict[str, int] = {}
    for entry in failed:
        seen[entry["exception"].code] = seen.get(entry["exception"].code, 0) + 1
    assert seen == names  # each failure named by its format's error
    figures = env.sm_locust_llm.window(0, 4e9).figures(1.0)
    assert figures["requests"] == clean
    assert abs(figures["output_tokens"] - tokens) <= 0.02 * tokens
    arrived = sum(b.arrived for b in env.sm_locust_llm.buckets.values())  # the failed streams' tokens taken back
    assert abs(arrived - tokens) <= 0.02 * tokens
    assert figures["ttft_p50_ms"] == pytest.approx(p50(true_ttft), rel=0.10)
    assert figures["itl_p50_ms"] == pytest.approx(p50(true_itl), rel=0.10)


def test_a_chunk_of_two_tokens_gives_two_gaps_of_half_its_time():
    """vLLM chunks carrying 2 tokens each, 50 ms apart, the server's count 8: ITL 25 ms, not 50."""
    env = Environment()
    client = ReplayClient(env)
    call = token_accounting(client.invoke_stream, env)
    parts = events((WIRE / "openai" / "vllm_multitoken.sse").read_bytes())
    client.plans.append([(part, 100.0 + 50.0 * max(0, min(i - 1, 3))) for i, part in enumerate(parts)])
    assert call(Invocation(body=b"{}"), started=time.perf_counter() - 0.4) is not None
    figures = env.sm_locust_llm.window(0, 4e9).figures(1.0)
    assert figures["output_tokens"] == 8 and figures["itl_p50_ms"] == pytest.approx(25.0, rel=0.02)
    assert figures["ttft_p50_ms"] == pytest.approx(100.0, rel=0.02)


# -- the local endpoint's bytes against the same samples -----------------------------------------


def emulated(fmt: str, tokens: int, *, details: bool, usage: bool, fail_at: int | None = None) -> bytes:
    body = ({"inputs": "What is Deep Learning?", "parameters": {"max_new_tokens": tokens, "details": details}}
            if fmt in (TGI, LMI) else
            {"messages": [{"role": "user", "content": "What is Deep Learning?"}], "max_tokens": tokens,
             "stream_options": {"include_usage": usage}})
    formatter = Formatter(fmt, parse_request(orjson.dumps(body)), tokens, server_counts=True)
    sent = tokens if fail_at is None else fail_at
    return b"".join(formatter.token(i) for i in range(sent)) + (formatter.error(sent) if fail_at is not None else b"")


EMULATED_ERRORS = {TGI: "TGI.generation", LMI: "LMI.error", OPENAI: "OpenAI.InternalServerError"}


@pytest.mark.parametrize("fmt", [TGI, LMI, OPENAI])
@pytest.mark.parametrize("counts", [True, False])
@pytest.mark.parametrize("fail_at", [None, 0, 3])
def test_the_emulator_writes_only_what_the_samples_contain(fmt, counts, fail_at):
    raw = emulated(fmt, 7, details=counts, usage=counts, fail_at=fail_at)
    assert conforms(raw, fmt) == []
    parts = events(raw)
    count = count_stream(payload for payload, _ in cut(parts, [0.0] * len(parts), random.Random(fmt)))
    if fail_at is None:
        assert count.error is None and count.counted == 7
        server = counts and not (fmt == LMI)  # LMI's details carry no prompt count
        assert count.server_output == (7 if counts else None)
        assert (count.server_input is not None) == server
    else:
        assert count.error is not None and count.error.code == EMULATED_ERRORS[fmt] and count.counted == fail_at


def test_a_foreign_event_does_not_conform():
    """The check can fail: a TGI event with a space after `data:`, LMI with compact JSON, a vLLM chunk
    missing a key, are each refused."""
    tgi = emulated(TGI, 2, details=True, usage=False)
    assert conforms(tgi.replace(b"data:", b"data: "), TGI)
    lmi = emulated(LMI, 2, details=True, usage=False)
    assert conforms(json.dumps(json.loads(lmi.splitlines()[0]), separators=(",", ":")).encode() + b"\n", LMI)
    vllm = emulated(OPENAI, 2, details=False, usage=True)
    assert conforms(vllm.replace(b',"logprobs":null', b""), OPENAI)


# -- serve --llm --llm-format X: bytes and counts over HTTP (e2e) ---------------------------------


@pytest.fixture(autouse=True)
def _credentials(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


@pytest.mark.e2e
@pytest.mark.parametrize("fmt", [TGI, LMI, OPENAI])
def test_serve_streams_conforming_bytes_and_its_failures_are_the_clients(fmt, tmp_path):
    config = LlmConfig(max_sequences=8, step_ms=4.0, step_ms_per_seq=0.2, prefill_ms_per_token=0.0, format=fmt,
                       error_ratio=0.3)
    body = ({"inputs": "What is Deep Learning?", "parameters": {"max_new_tokens": 12, "details": True}, "stream": True}
            if fmt != OPENAI else
            {"messages": [{"role": "user", "content": "What is Deep Learning?"}], "max_tokens": 12, "stream": True,
             "stream_options": {"include_usage": True}})
    with LocalEndpoint(llm=config, seed=7, log_path=tmp_path / "endpoint.log") as endpoint:
        env = Environment()
        client = create_client("fast", env, "llm", endpoint_url=endpoint.url)
        call = token_accounting(client.invoke_stream, env)
        listener = client.chunk_listener
        chunks: dict[object, list[bytes]] = {}

        def keep(payload):
            chunks.setdefault(gevent.getcurrent(), []).append(payload)
            return listener(payload)

        client.chunk_listener = keep
        entries: list[dict] = []
        env.events.request.add_listener(lambda **kw: entries.append(kw))

        def user():
            for _ in range(6):
                call(Invocation(body=orjson.dumps(body)))

        greenlets = [gevent.spawn(user) for _ in range(4)]
        gevent.joinall(greenlets, raise_error=True)
        stats = endpoint.stats()
    streams = [e for e in entries if e["request_type"] == INVOKE_ENDPOINT_STREAM]
    failed = [e for e in streams if e["exception"] is not None]
    assert len(streams) == 24 == stats["invocations"]
    assert len(failed) == stats["in_band_errors"] and len(streams) - len(failed) == stats["successes"]
    assert 0 < len(failed) < 24  # the ratio drew some of each (seeded)
    assert {e["exception"].code for e in failed} == {EMULATED_ERRORS[fmt]}
    received = b"".join(b"".join(parts) for parts in chunks.values())
    assert conforms(received, fmt) == []
    figures = env.sm_locust_llm.window(0, 4e9).figures(1.0)
    assert figures["requests"] == len(streams) - len(failed) and figures["output_tokens"] == 12 * figures["requests"]
