"""LoRA adapters of the LLM emulation (sm_locust.endpoint.adapters), the pure parts and the cache on a
fake clock: names, the settings' checks, which request is cold (its own load or another's), least
recently used out first, an adapter in use kept until its answer is closed, the wait in the answer's
headers, and SageMaker's ValidationErrors for a missing or unknown component."""

from __future__ import annotations

import pytest

from sm_locust.endpoint.adapters import FULL_POLL_S, AdapterCache, AdapterSpec, adapter_names, parse_adapters
from sm_locust.endpoint.components import COMPONENT_ENVIRON
from sm_locust.endpoint.llm import LlmConfig
from sm_locust.invocation import MODEL_WAIT_HEADER
from tests.clocks import StepClock


def _cache(cache: int = 2, count: int = 4, load_ms: float = 300.0) -> tuple[AdapterCache, StepClock]:
    clock = StepClock()
    spec = AdapterSpec("base", adapter_names(count), cache, load_ms)
    return AdapterCache(spec, clock=clock, sleep=clock.sleep), clock


def _call(cache: AdapterCache, name: str | None, close: bool = True):
    """One request through the cache: (status, headers, the answer object)."""
    seen: dict = {}

    def start_response(status, headers, exc_info=None):
        seen["status"], seen["headers"] = status, dict(headers)

    def answer(respond):
        respond("200 OK", [("Content-Type", "text/plain")])
        return [b"tokens"]

    environ = {COMPONENT_ENVIRON: name} if name else {}
    rejected = cache.check(environ)
    if rejected:
        return rejected, {}, None
    body = cache.serve(environ, start_response, answer, lambda *a: [])
    assert list(body) == [b"tokens"]
    if close and hasattr(body, "close"):
        body.close()
    return seen["status"], seen["headers"], body


def test_a_count_names_adapters_and_names_are_checked():
    assert parse_adapters("3") == ("adapter-1", "adapter-2", "adapter-3")
    assert parse_adapters(" sql, chat ") == ("sql", "chat")
    for bad, words in (("0", "between 1"), ("a_b", "not an inference component name"), ("a,a", "twice"),
                       (",", "needs a count")):
        with pytest.raises(ValueError, match=words):
            parse_adapters(bad)


def test_the_llm_settings_check_the_adapter_flags():
    assert LlmConfig().adapter_spec() is None
    spec = LlmConfig(adapters="4").adapter_spec()
    assert spec is not None and (spec.cache, spec.load_ms, spec.base) == (4, 500.0, "base")  # default: all fit
    assert LlmConfig(adapters="4", adapter_cache=2).flags()[-4:] == ["--llm-adapters", "4", "--llm-adapter-cache", "2"]
    for config, words in ((LlmConfig(adapter_cache=2), "add --llm-adapters"),
                          (LlmConfig(adapters="base,x"), "also an adapter"),
                          (LlmConfig(adapters="2", adapter_load_ms=-1), "must not be negative")):
        with pytest.raises(ValueError, match=words):
            config.validate()


def test_a_miss_waits_for_its_load_and_says_so_a_hit_does_not():
    cache, clock = _cache(load_ms=300)
    status, headers, _ = _call(cache, "adapter-1")
    assert status == "200 OK" and float(headers[MODEL_WAIT_HEADER]) == 300.0 and clock.now == pytest.approx(0.3)
    status, headers, _ = _call(cache, "adapter-1")
    assert MODEL_WAIT_HEADER not in headers and clock.now == pytest.approx(0.3)
    assert cache.stats()["adapters"] == {"adapter-1": {"requests": 2, "cold": 1, "hits": 1}}


def test_the_base_component_needs_no_adapter():
    cache, clock = _cache()
    _, headers, _ = _call(cache, "base")
    assert MODEL_WAIT_HEADER not in headers and clock.now == 0.0
    assert cache.stats()["adapter_cache"]["lookups"] == 0


def test_least_recently_used_adapter_is_unloaded_first():
    cache, _ = _cache(cache=2)
    for name in ("adapter-1", "adapter-2", "adapter-1", "adapter-3"):  # adapter-2 is the least recently used
        _call(cache, name)
    _, headers_1, _ = _call(cache, "adapter-1")
    _, headers_2, _ = _call(cache, "adapter-2")
    assert MODEL_WAIT_HEADER not in headers_1 and MODEL_WAIT_HEADER in headers_2
    totals = cache.stats()["adapter_cache"]
    assert (totals["loads"], totals["unloads"], totals["loaded"]) == (4, 2, 2)
    cold = sum(a["cold"] for a in cache.stats()["adapters"].values())
    assert cold == totals["loads"]  # one request at a time: every cold request is a load


def test_a_request_during_anothers_load_waits_for_it_and_is_cold():
    cache, clock = _cache(load_ms=300)
    cache.sleep = clock.sleeps.append  # the clock moves only when the test says so
    assert cache.admit(0) is not None and clock.sleeps == [0.3]
    clock.now = 0.1  # the load is under way
    assert cache.admit(0) is not None and clock.sleeps == [0.3, pytest.approx(0.2)]  # the rest of that load
    assert cache.stats()["adapter_cache"]["loads"] == 1
    assert cache.stats()["adapters"]["adapter-1"]["cold"] == 2


def test_an_adapter_in_use_is_kept_until_its_answer_is_closed():
    cache, clock = _cache(cache=1)
    _, _, open_answer = _call(cache, "adapter-1", close=False)  # a stream still being read
    waits: list[tuple[float, int]] = []

    def sleep(seconds: float) -> None:  # the next request waits for room; the stream ends meanwhile
        waits.append((seconds, cache.stats()["adapter_cache"]["unloads"]))
        clock.now += seconds
        open_answer.close()

    cache.sleep = sleep
    _, headers, _ = _call(cache, "adapter-2")
    assert waits[0] == (FULL_POLL_S, 0)  # adapter-1 was not unloaded while its answer was open
    assert MODEL_WAIT_HEADER in headers and cache.stats()["adapter_cache"]["unloads"] == 1
    open_answer.close()  # closing twice releases once
    assert cache.cache.pins(0) == 0 and cache.cache.pins(1) == 0


def test_missing_and_unknown_components_are_validation_errors():
    cache, _ = _cache()
    assert _call(cache, None)[0][0] == "ValidationError"
    code, message = _call(cache, "adapter-9")[0]
    assert code == "ValidationError" and "adapter-9" in message and "not found" in message


@pytest.mark.parametrize("argv, words", [
    (["--llm-adapters", "4"], "add --llm"),
    (["--llm", "--llm-adapter-cache", "2"], "add --llm-adapters"),
    (["--llm", "--llm-adapters", "4", "--llm-adapter-cache", "0"], "--llm-adapter-cache"),
    (["--llm", "--llm-adapters", "a_b"], "not an inference component name"),
    (["--llm", "--llm-adapters", "2", "--inference-components", "a:1"], "cannot be combined with --llm"),
])
def test_serve_refuses_bad_adapter_flags_in_one_line(argv, words, capsys):
    from sm_locust.cli import main

    try:
        code = main(["serve", *argv])
    except SystemExit as exc:  # argparse's own range check
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0], err
