"""Traffic mixes against the endpoint emulation (`serve --multi-model`, `--inference-components`): the
client side of issue 21's acceptance, as a user runs it (`sm-locust run`).

- A Zipf mix over 100 models on an instance that holds 30: the cache-hit rate summary.json reports
  (from the emulation's wait header) is within 3 points of `lru_simulation` of the same distribution,
  and each target's requests and cold requests equal the endpoint's own per-model counters (users
  finish their request at the end: `--stop-timeout`, so nothing is in flight when the counts are taken).
- Inference components routed by name, an unknown component, an unknown model, and a multi-model
  endpoint called without TargetModel, through both transports: ValidationError, as botocore names it.
Loads are milliseconds (compressed clocks): what is checked is counting, not timing.
"""

from __future__ import annotations

import json
import statistics

import pytest

from sm_locust.endpoint.components import parse_components
from sm_locust.endpoint.faults import EndpointConfig
from sm_locust.endpoint.modelcache import lru_simulation
from sm_locust.endpoint.multimodel import MultiModelConfig
from sm_locust.endpoint.server import LocalEndpoint
from sm_locust.mix import Picker, parse_mix
from sm_locust.transport import TRANSPORTS
from tests.conftest import SAMPLE_PAYLOAD, run_cli

pytestmark = pytest.mark.e2e  # every test here starts a server, a process or Locust


def _run(url: str, out, *extra: str, users: int | None, seconds: int) -> dict:
    load = ("-u", str(users), "-r", "100") if users else ()  # None: a shape decides the load
    result = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", url, "--payload", str(SAMPLE_PAYLOAD),
                     *load, "-t", f"{seconds}s", "--out", str(out), "-q", *extra, "--", "--stop-timeout", "10")
    assert result.returncode in (0, 1), result.stdout + result.stderr  # 1: the run had failures
    assert "Traceback" not in result.stderr, result.stderr
    return json.loads((out / "summary.json").read_text())


def _per_target(summary: dict) -> dict[str, dict]:
    return {t["name"]: t for t in summary["targets"]}


def test_a_zipf_mix_hits_the_cache_as_lru_predicts_and_counts_as_the_endpoint(tmp_path):
    spec, memory_mb, size_mb = "zipf:1.1:100", 3000, 100  # 30 of 100 models fit
    config = EndpointConfig(port=0, multi_model=MultiModelConfig(model_count=100, model_size_mb=str(size_mb),
                                                                 memory_mb=memory_mb, download_ms=2, load_ms=3))
    with LocalEndpoint(config, log_path=tmp_path / "endpoint.log") as endpoint:
        summary = _run(endpoint.url, tmp_path / "run", "--target-models", spec, "--seed", "3", users=4, seconds=6)
        stats = endpoint.stats()
    models, cache = stats["models"], summary["model_cache"]
    requests = summary["totals"]["requests"]
    assert requests >= 1500 and summary["totals"]["failures"] == 0
    assert list(summary["by_name"]) == ["ep"]

    # per target: what the client counted is what the endpoint counted
    assert sum(m["requests"] for m in models.values()) == requests
    targets = _per_target(summary)
    for name, entry in targets.items():
        if name != "others":
            assert (entry["requests"], entry["cold"]) == (models[name]["requests"], models[name]["cold"]), name
    shown = set(targets) - {"others"}
    assert targets["others"]["requests"] == sum(m["requests"] for n, m in models.items() if n not in shown)
    assert targets["others"]["targets"] == len(set(models) - shown)

    # the hit rate: the endpoint's own, and LRU's over the same distribution (cold start, same length)
    assert cache["source"] == "endpoint"
    mme = stats["multi_model"]
    assert cache["hit_rate"] == pytest.approx(mme["cache_hits"] / mme["cache_lookups"], abs=1e-6)
    mix = parse_mix(spec)
    simulated = statistics.mean(
        lru_simulation([mix.names[i] for i in Picker(mix.weights, seed, 0).sequence(requests)], size_mb,
                       memory_mb).hit_rate for seed in range(100, 110))
    assert abs(cache["hit_rate"] - simulated) <= 0.03, (cache["hit_rate"], simulated)
    assert cache["cold"]["requests"] == sum(m["cold"] for m in models.values())
    assert cache["cold"]["wait_p50_ms"] >= 3  # at least the load (the download too, unless on disk)


@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_components_are_routed_by_name_and_an_unknown_one_is_a_validation_error(tmp_path, transport):
    config = EndpointConfig(port=0, inference_components=parse_components("a:2,b:1"))
    with LocalEndpoint(config, log_path=tmp_path / "endpoint.log") as endpoint:
        summary = _run(endpoint.url, tmp_path / "run", "--inference-components", "a=0.5,b=0.3,ghost=0.2",
                       "--transport", transport, users=2, seconds=2)
        stats = endpoint.stats()
    targets = _per_target(summary)
    served = stats["inference_components"]
    assert (targets["a"]["requests"], targets["b"]["requests"]) == (served["a"]["requests"], served["b"]["requests"])
    assert targets["a"]["failures"] == targets["b"]["failures"] == 0
    assert targets["ghost"]["failures"] == targets["ghost"]["requests"] > 0
    assert summary["totals"]["errors"] == {"ValidationError": targets["ghost"]["requests"]}
    assert list(summary["by_name"]) == ["ep"]


@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_an_unknown_model_and_a_missing_target_model_are_validation_errors(tmp_path, transport):
    config = EndpointConfig(port=0, multi_model=MultiModelConfig(model_count=4, model_size_mb="10", memory_mb=100,
                                                                 download_ms=1, load_ms=1))
    with LocalEndpoint(config, log_path=tmp_path / "endpoint.log") as endpoint:
        mixed = _run(endpoint.url, tmp_path / "mixed", "--target-models", "model-0001.tar.gz=0.5,nope.tar.gz=0.5",
                     "--transport", transport, users=1, seconds=2)
        missing = _run(endpoint.url, tmp_path / "missing", "--transport", transport, users=1, seconds=1)
        stats = endpoint.stats()
    targets = _per_target(mixed)
    assert targets["model-0001.tar.gz"]["failures"] == 0
    assert targets["model-0001.tar.gz"]["requests"] == stats["models"]["model-0001.tar.gz"]["requests"]
    assert mixed["totals"]["errors"] == {"ValidationError": targets["nope.tar.gz"]["requests"]}
    assert missing["totals"]["requests"] == missing["totals"]["errors"]["ValidationError"] > 0
    assert "targets" not in missing  # no request named a target


def test_the_plateau_search_and_open_loop_send_the_mix_unchanged(tmp_path):
    """The shapes draw from the same pool: a plateau search over users and an open-loop rate both send
    the mix, and summary.json counts it per target beside the verdict."""
    config = EndpointConfig(port=0, multi_model=MultiModelConfig(model_count=50, model_size_mb="100", memory_mb=1000,
                                                                 download_ms=2, load_ms=5))
    with LocalEndpoint(config, log_path=tmp_path / "endpoint.log") as endpoint:
        result = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", endpoint.url, "--payload",
                         str(SAMPLE_PAYLOAD), "--target-models", "zipf:1.0:50", "--shape", "plateau",
                         "--step-seconds", "2", "--max-users", "3", "--latency-slo-ms", "2000",
                         "--out", str(tmp_path / "plateau"), "-q", timeout=110)
        assert result.returncode == 0, result.stdout + result.stderr
        opened = _run(endpoint.url, tmp_path / "open", "--target-models", "zipf:1.0:50", "--target-rps", "100",
                      users=None, seconds=2)
        stats = endpoint.stats()
    plateau = json.loads((tmp_path / "plateau" / "summary.json").read_text())
    assert plateau["plateau"]["text"] and len(plateau["steps"]) >= 2
    for summary in (plateau, opened):
        assert summary["mix"]["spec"] == "zipf:1.0:50" and list(summary["by_name"]) == ["ep"]
        assert sum(t["requests"] for t in summary["targets"]) == summary["totals"]["requests"] > 0
        assert summary["targets"][0]["name"] == "model-0001.tar.gz"
    sent = plateau["totals"]["requests"] + opened["totals"]["requests"]
    cut_short = plateau["totals"]["in_flight_at_stop"] + opened["totals"]["in_flight_at_stop"]
    # what the endpoint served beyond the completed requests is the requests the stops cut short (was "<= 3",
    # a guess: 4 once, with 3 plateau users and the open loop's in flight)
    assert 0 <= sum(m["requests"] for m in stats["models"].values()) - sent <= cut_short
