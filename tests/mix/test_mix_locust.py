"""Traffic mixes end to end: `sm-locust run --target-models / --inference-components` as a user runs it.

Against `tests.fakes.TargetRecorder` (a fast stand-in that records each request's target in the
order it arrived, per connection, and answers like a tiny multi-model endpoint), through both
transports: the endpoint receives exactly the seeded sequence; a 0.7/0.3 mix lands within 3 points
over 2,000+ requests; Locust keeps one entry for the endpoint while summary.json's `targets` counts
each target as the endpoint counted it; an unknown inference component is botocore's
ValidationError; with two worker processes each sends its own seeded stream and the per-target
counts travel to the master; 1,000 models stay one Locust row. (The endpoint emulation's own counters
and LRU are checked in tests/endpoint/test_multimodel_endpoint.py.) No count is raced against the
clock: what a 2-s run reaches is the machine's, so each check holds for whatever number arrived.
"""

from __future__ import annotations

import csv
import json
from collections import Counter

import pytest

from sm_locust.mix import Picker, parse_mix
from sm_locust.transport import TRANSPORTS
from tests.conftest import SAMPLE_PAYLOAD, assert_one_line_error, run_cli
from tests.fakes import TargetRecorder

pytestmark = pytest.mark.e2e  # every test here starts a server, a process or Locust


def _run(url: str, out, *extra: str, users: int = 1, seconds: int = 2, env: dict | None = None) -> dict:
    result = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", url, "--payload", str(SAMPLE_PAYLOAD),
                     "-u", str(users), "-r", "100", "-t", f"{seconds}s", "--out", str(out), "-q", *extra, env=env)
    assert result.returncode in (0, 1), result.stdout + result.stderr  # 1: the run had failures
    assert "Traceback" not in result.stderr, result.stderr
    return json.loads((out / "summary.json").read_text())


def _expected(spec: str, seed: int, process: int, count: int, field: str = "target_model") -> list[str]:
    mix = parse_mix(spec, field)
    return [mix.names[i] for i in Picker(mix.weights, seed, process).sequence(count)]


def _check_counts(summary: dict, received: list, users: int) -> None:
    """summary.json `targets` sums to totals.requests and matches what the endpoint received (a user's
    last request may be in flight when the run stops: counted by the endpoint, not by the client)."""
    targets = summary["targets"]
    assert sum(t["requests"] for t in targets) == summary["totals"]["requests"]
    server = Counter(received)
    for entry in targets:
        if entry["name"] != "others":
            assert 0 <= server[entry["name"]] - entry["requests"] <= users, (entry, server[entry["name"]])


@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_a_weighted_mix_sends_the_seeded_sequence(tmp_path, transport):
    spec = "a.tar.gz=0.7,b.tar.gz=0.3"
    with TargetRecorder() as fake:
        summary = _run(fake.url, tmp_path / "run", "--target-models", spec, "--seed", "5", "--transport", transport)
    received = fake.targets
    assert len(received) > 10  # how many a 2-s run sends is the machine's (95 at load 10, 3 CPU hogs)
    assert received == _expected(spec, 5, 0, len(received))  # one user, one process: exactly the stream
    assert list(summary["by_name"]) == ["ep"]  # Locust: one entry for the endpoint
    _check_counts(summary, received, users=1)
    assert [t["name"] for t in summary["targets"]] == ["a.tar.gz", "b.tar.gz"]
    assert summary["mix"] == {"field": "target_model", "spec": spec, "kind": "list", "targets": 2,
                              "top_weights": {"a.tar.gz": 0.7, "b.tar.gz": 0.3}, "seed": 5}
    cache = summary["model_cache"]  # the stand-in marks a model's first request as having waited 12.5 ms
    assert cache["source"] == "endpoint" and cache["cold"]["requests"] == 2 and cache["cold"]["wait_p50_ms"] == 12
    assert {t["name"]: t["cold"] for t in summary["targets"]} == {"a.tar.gz": 1, "b.tar.gz": 1}


def test_seventy_thirty_over_two_thousand_requests(tmp_path):
    stream = _expected("a=0.7,b=0.3", 8, 0, 2000, "inference_component")  # the seeded picks: 70/30 within 3 points
    assert abs(stream.count("a") / len(stream) - 0.7) <= 0.03, Counter(stream)
    with TargetRecorder() as fake:
        _run(fake.url, tmp_path / "run", "--inference-components", "a=0.7,b=0.3", "--seed", "8", users=4, seconds=2)
    received = fake.targets
    # what arrived is that stream, as far as the run got (a machine's speed sets how far): each name's count
    # equals the first len(received) picks' but for the <= 4 picks in flight at the stop
    first = Counter(_expected("a=0.7,b=0.3", 8, 0, len(received), "inference_component"))
    assert len(received) > 100 and set(received) == {"a", "b"}
    assert all(abs(Counter(received)[name] - first[name]) <= 4 for name in "ab"), (Counter(received), first)


@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_inference_components_and_an_unknown_name(tmp_path, transport):
    with TargetRecorder(unknown={"ic-gone"}) as fake:
        summary = _run(fake.url, tmp_path / "run", "--inference-components", "ic-a=0.5,ic-gone=0.5",
                       "--transport", transport)
    received = fake.targets
    assert set(received) == {"ic-a", "ic-gone"}
    by_target = {t["name"]: t for t in summary["targets"]}
    assert by_target["ic-a"]["failures"] == 0
    assert by_target["ic-gone"]["failures"] == by_target["ic-gone"]["requests"] > 0
    assert summary["totals"]["errors"] == {"ValidationError": by_target["ic-gone"]["requests"]}
    _check_counts(summary, received, users=1)
    # components have copies, not a model cache; but an endpoint that marks cold requests (as the fake marks
    # each name's first, and LoRA adapters' loads are) gets its split: ic-a's first request, and no other
    cache = summary["model_cache"]
    assert (cache["source"], cache["cold"]["requests"]) == ("endpoint", 1)
    assert cache["requests"] == by_target["ic-a"]["requests"]
    assert summary["mix"]["field"] == "inference_component"


def test_each_worker_process_sends_its_own_seeded_stream(tmp_path):
    spec = "zipf:1.1:50"
    with TargetRecorder() as fake:
        summary = _run(fake.url, tmp_path / "run", "--target-models", spec, "--seed", "11", "--processes", "2",
                       users=2, seconds=4)
    streams = [seq for seq in fake.by_connection.values() if seq]
    assert len(streams) == 2, {k: len(v) for k, v in fake.by_connection.items()}  # one user per process, keep-alive
    expected = [_expected(spec, 11, k, max(len(s) for s in streams)) for k in (0, 1)]
    matched = sorted(k for s in streams for k in (0, 1) if expected[k][:len(s)] == s)
    assert matched == [0, 1]  # worker 0 sent stream 0, worker 1 stream 1 (whichever connected first)
    # the workers' per-target counts reached the master, their last reports included (summary.json is written
    # again at quit): they sum to the master's totals, and with the requests the stop cut short to what the
    # endpoint received
    targets = summary["targets"]
    totals = summary["totals"]
    assert sum(t["requests"] for t in targets) == totals["requests"] > 0
    assert totals["requests"] + totals["in_flight_at_stop"] == len(fake.targets), totals
    server = Counter(fake.targets)
    assert all(t["requests"] <= server[t["name"]] for t in targets if t["name"] != "others")
    assert summary["workers"]["connected"] == 2


def test_a_thousand_models_keep_one_locust_row(tmp_path):
    with TargetRecorder() as fake:
        summary = _run(fake.url, tmp_path / "run", users=4, seconds=2,
                       env={"SM_LOCUST_TARGET_MODELS": "zipf:0.8:1000", "SM_LOCUST_SEED": "3"})
    rows = list(csv.DictReader((tmp_path / "run" / "locust_stats.csv").open()))
    assert [(r["Type"], r["Name"]) for r in rows] == [("InvokeEndpoint", "ep"), ("", "Aggregated")]
    targets = summary["targets"]
    assert len(targets) == 21 and targets[-1]["name"] == "others"
    # more models beyond the 20 named than in them; a model the endpoint saw only in a request still in flight
    # at the stop is not in summary.json (seen once with a CPU hog: 696 of 697)
    beyond = len(set(fake.targets)) - 20
    assert beyond - summary["totals"]["in_flight_at_stop"] <= targets[-1]["targets"] <= beyond and beyond > 20
    _check_counts(summary, fake.targets, users=4)
    assert summary["mix"]["spec"] == "zipf:0.8:1000" and summary["mix"]["seed"] == 3


def test_a_bad_mix_is_one_line_before_anything_starts(tmp_path):
    result = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", "http://127.0.0.1:9", "--payload",
                     str(SAMPLE_PAYLOAD), "-t", "1s", "--out", str(tmp_path / "run"), "--target-models", "zipf:1.1")
    assert_one_line_error(result, 2, "--target-models 'zipf:1.1' is not zipf:S:N")
    assert not (tmp_path / "run" / "summary.json").exists()
