"""LoRA adapters end to end: a traffic mix over 4 adapter inference components (`run
--inference-components`) streaming from `serve --llm --llm-adapters 4 --llm-adapter-cache 2`, as a user
runs it. The client's cold TTFTs are exactly the endpoint's own adapter loads, target by target (one
user: no request finds another's load under way, so every cold request is a load; the user finishes its
request at the end, `--stop-timeout`, so nothing is in flight when the counts are taken), and a cold
first token comes later than a warm one (a relation: the load is 150 ms, a warm prefill a few ms)."""

from __future__ import annotations

import json

import locust  # noqa: F401  (gevent monkey-patching before botocore)
from locust.env import Environment

import pytest

from sm_locust.endpoint.llm import LlmConfig
from sm_locust.invocation import Invocation
from sm_locust.transport import TRANSPORTS
from tests.conftest import run_cli
from tests.fakes import recorded, signed_client

pytestmark = pytest.mark.e2e  # starts a server and Locust

ADAPTERS = ("adapter-1", "adapter-2", "adapter-3", "adapter-4")


def test_cold_ttfts_are_the_endpoints_adapter_loads_and_slower_than_warm(endpoint_factory, tmp_path):
    ep = endpoint_factory(llm=LlmConfig(max_sequences=16, step_ms=2.0, step_ms_per_seq=0.1, prefill_ms_per_token=0.0,
                                        adapters="4", adapter_cache=2, adapter_load_ms=150.0))
    out = tmp_path / "run"
    result = run_cli("run", "--endpoint-name", "llm", "--endpoint-url", ep.url, "--prompts", "synthetic:16",
                     "--max-new-tokens", "8", "--stream", "true", "--seed", "3",
                     "--inference-components", "uniform:4",  # adapter-1 ... adapter-4
                     "-u", "1", "-r", "1", "-t", "6s", "--out", str(out), "--", "--stop-timeout", "10", timeout=90)
    assert result.returncode == 0, result.stdout + result.stderr
    stats = ep.stats()
    summary = json.loads((out / "summary.json").read_text())
    adapters, cache = stats["adapters"], stats["adapter_cache"]
    targets = {t["name"]: t for t in summary["targets"]}
    assert set(targets) == set(ADAPTERS) and summary["totals"]["failures"] == 0

    # counts: what the client marked cold is what the endpoint loaded, adapter by adapter
    assert cache["loads"] > cache["cache"]  # more adapters than places: some were unloaded and loaded again
    assert cache["unloads"] == cache["loads"] - cache["cache"]
    for name, entry in targets.items():
        cold = entry["ttft_cold"]["requests"] if entry["ttft_cold"] else 0
        warm = entry["ttft_warm"]["requests"] if entry["ttft_warm"] else 0
        assert (entry["requests"], entry["cold"], cold) == (adapters[name]["requests"], adapters[name]["cold"],
                                                            adapters[name]["cold"]), name
        assert cold + warm == entry["requests"], name
    model_cache = summary["model_cache"]
    assert model_cache["source"] == "endpoint"
    assert model_cache["ttft_cold"]["requests"] == cache["loads"] == sum(a["cold"] for a in adapters.values())
    assert model_cache["ttft_warm"]["requests"] == cache["hits"]

    # timing, as a relation: a cold first token waited for the load, a warm one did not
    assert model_cache["ttft_cold"]["p50_ms"] > model_cache["ttft_warm"]["p95_ms"]
    assert model_cache["cold"]["wait_p50_ms"] >= 150  # the endpoint's own report of each wait: the load at least
    closing = [line for line in result.stdout.splitlines() if "TTFT cold" in line]
    assert len(closing) == 1 and f"{cache['loads']} cold" in closing[0], result.stdout


@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_a_streams_adapter_wait_reaches_its_ttft_through_either_transport(endpoint_factory, transport):
    ep = endpoint_factory(llm=LlmConfig(step_ms=2.0, step_ms_per_seq=0.0, adapters="sql,chat", adapter_cache=1,
                                        adapter_load_ms=50.0))
    env = Environment()
    seen = recorded(env)
    client = signed_client(transport, env, ep.url, "llm")
    body = b'{"inputs": "hello there", "parameters": {"max_new_tokens": 4}}'
    results = [client.invoke_stream(Invocation(body=body, inference_component=name))
               for name in ("sql", "sql", "chat", "base", "sql")]
    waits = [r.model_wait_ms if r is not None else "failed" for r in results]
    assert [w is not None for w in waits] == [True, False, True, False, True]  # the base needs no adapter
    assert all(w is None or w >= 50 for w in waits)
    ttfts = [e["context"].get("model_wait_ms") for e in seen if e["request_type"] == "TTFT"]
    assert ttfts == waits
    streams = [e["context"].get("model_wait_ms") for e in seen
               if e["request_type"] == "InvokeEndpointWithResponseStream"]
    assert streams == waits and all(e["exception"] is None for e in seen)


def test_two_workers_share_one_adapter_cache_and_the_client_counts_as_the_endpoint(endpoint_factory, tmp_path):
    """4 users, 2 endpoint workers: a request may find its adapter's load under way (cold, not a load of
    its own), and a request for a third adapter waits while both places hold adapters in use; still the
    client's cold count is the endpoint's, adapter by adapter, and the loads are one cache's."""
    ep = endpoint_factory(workers=2, llm=LlmConfig(max_sequences=16, step_ms=2.0, step_ms_per_seq=0.1,
                                                   prefill_ms_per_token=0.0, adapters="4", adapter_cache=2,
                                                   adapter_load_ms=100.0))
    out = tmp_path / "run"
    result = run_cli("run", "--endpoint-name", "llm", "--endpoint-url", ep.url, "--prompts", "synthetic:16",
                     "--max-new-tokens", "8", "--stream", "true", "--seed", "5", "--inference-components", "zipf:1:4",
                     "-u", "4", "-r", "4", "-t", "6s", "--out", str(out), "--", "--stop-timeout", "10", timeout=90)
    assert result.returncode == 0, result.stdout + result.stderr
    stats = ep.stats()
    summary = json.loads((out / "summary.json").read_text())
    adapters, cache = stats["adapters"], stats["adapter_cache"]
    targets = {t["name"]: t for t in summary["targets"]}
    for name, entry in targets.items():
        assert (entry["requests"], entry["cold"]) == (adapters[name]["requests"], adapters[name]["cold"]), name
    cold = sum(a["cold"] for a in adapters.values())
    assert summary["model_cache"]["ttft_cold"]["requests"] == cold >= cache["loads"] > cache["cache"]
    assert cache["loaded"] <= cache["cache"]  # one cache for both workers: never more than its places
