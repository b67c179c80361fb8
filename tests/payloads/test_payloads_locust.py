"""Every payload source and serializer through the default locustfile, against the local endpoint.

In-process Locust runs (a fixed number of requests each, well under a second): the default
locustfile's `_load_payloads` listener builds the pool from the options at test start and
`InvokeEndpointUser` sends it, with `--validate-response` on, so a body the endpoint reads
differently from what was meant (wrong rows, wrong format) shows up as a failure.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import gevent
import locust  # noqa: F401  (gevent patching before boto3)
from locust.env import Environment

import numpy as np
import pytest

from sm_locust.endpoint.model import sample_rows
from sm_locust.endpoint.server import LocalEndpoint
from sm_locust.invocation import INVOKE_ENDPOINT
from sm_locust.locustfiles.sagemaker import InvokeEndpointUser, _load_payloads
from sm_locust.record.recorder import RunRecorder
from sm_locust.serializers import create_serializer
from sm_locust.users.fanout import INVOKE_ENDPOINT_SPLIT
from tests.conftest import ROOT

DATA = ROOT / "sm_locust" / "data"
REQUESTS = 24


def options(url: str, payload, **payload_options) -> SimpleNamespace:
    return SimpleNamespace(**{"endpoint_name": "ep", "endpoint_url": url, "payload": str(payload),
                              "validate_response": True, **payload_options})


def run(opts: SimpleNamespace, requests: int = REQUESTS, users: int = 2, recorder_dir=None) -> Environment:
    """Run the default locustfile's user until `requests` requests were made."""
    env = Environment(user_classes=[InvokeEndpointUser], parsed_options=opts)
    env.events.test_start.add_listener(_load_payloads)
    if recorder_dir is not None:
        env.sm_locust_recorder = RunRecorder(env, recorder_dir, endpoint="ep")
    runner = env.create_local_runner()
    runner.start(users, spawn_rate=users)
    with gevent.Timeout(20):
        while env.stats.total.num_requests < requests and getattr(env, "sm_locust_payloads", "not yet") is not None:
            gevent.sleep(0.02)
    runner.quit()
    return env


def assert_clean(env: Environment, request_type: str = INVOKE_ENDPOINT) -> None:
    errors = {str(e.error) for e in env.stats.errors.values()}
    assert not errors, errors
    assert env.stats.entries[("ep", request_type)].num_requests >= 1


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory):
    """One local endpoint for the module (each run is short; starting one per test costs more)."""
    ep = LocalEndpoint(log_path=tmp_path_factory.mktemp("endpoint") / "endpoint.log").start()
    yield ep
    ep.stop()


@pytest.fixture(scope="module")
def arrays(tmp_path_factory):
    folder = tmp_path_factory.mktemp("arrays")
    ids, vals = sample_rows(40, seed=11)
    np.savez(folder / "rows.npz", feat_ids=ids, feat_vals=vals)
    np.save(folder / "packed.npy", np.hstack([ids, vals]).astype(np.float32))
    return folder


@pytest.mark.e2e
@pytest.mark.parametrize("serializer, accept", [
    ("json", "application/json"),
    ("protobuf", "application/x-protobuf"),
    ("npy", "application/x-npy"),
    ("numpy-raw", "application/octet-stream"),
    ("csv", "text/csv"),
])
def test_npz_rows_with_each_serializer(endpoint, arrays, serializer, accept):
    env = run(options(endpoint.url, arrays / "rows.npz", serializer=serializer, batch_size=8, accept=accept))
    assert_clean(env)


@pytest.mark.e2e
def test_packed_npy_sent_raw(endpoint, arrays):
    env = run(options(endpoint.url, arrays / "packed.npy", serializer="raw", batch_size=5, selection="random"))
    assert_clean(env)


@pytest.mark.e2e
def test_plain_file_folder_and_jsonl(endpoint, tmp_path):
    folder = tmp_path / "bodies"
    folder.mkdir()
    ranking = dict(zip(("feat_ids", "feat_vals"), sample_rows(3, seed=2), strict=True))
    for name, fmt in (("a.json", "json"), ("b.csv", "csv"), ("c.npy", "npy")):
        (folder / name).write_bytes(create_serializer(fmt).serialize(ranking))
    for payload in (DATA / "ranking_10rows.json", folder, DATA / "ranking_invoke_args.jsonl"):
        env = run(options(endpoint.url, payload))
        assert_clean(env)


@pytest.mark.e2e
def test_a_function_source(endpoint, tmp_path):
    (tmp_path / "gen.py").write_text(
        "from sm_locust.endpoint.model import sample_rows\n"
        "def batches():\n"
        "    for n in (1, 5, 20):\n"
        "        ids, vals = sample_rows(n, seed=n)\n"
        "        yield {'feat_ids': ids, 'feat_vals': vals}\n"
    )
    env = run(options(endpoint.url, f"{tmp_path / 'gen.py'}:batches", serializer="protobuf", content_type="X-protobuf",
                      model_name="ranker"))
    assert_clean(env)


@pytest.mark.e2e
def test_split_through_the_locustfile_and_summary(endpoint, arrays, tmp_path):
    env = run(options(endpoint.url, arrays / "rows.npz", serializer="npy", batch_size=20, split=4),
              recorder_dir=tmp_path)
    assert_clean(env, INVOKE_ENDPOINT_SPLIT)
    logical = env.stats.entries[("ep", INVOKE_ENDPOINT_SPLIT)].num_requests
    # a user stopped mid-call leaves parts without their logical request (as any in-flight call)
    assert 4 * logical <= env.stats.entries[("ep/part", INVOKE_ENDPOINT)].num_requests <= 4 * (logical + 2)
    summary = json.loads((tmp_path / "summary.json").read_text())
    # totals count logical requests: the parts are inside them (else requests and rps x (K + 1))
    assert summary["totals"]["requests"] == logical
    assert sum(step["requests"] for step in summary["steps"]) <= logical
    payload = summary["payload"]
    assert payload["source"] == str(arrays / "rows.npz") and payload["count"] == 2
    assert payload["split"] == 4 and payload["part_avg_bytes"] < payload["avg_bytes"]
    assert payload["min_bytes"] <= payload["avg_bytes"] <= payload["max_bytes"] and payload["validate_response"] is True


@pytest.mark.e2e
def test_a_response_that_fails_validation_is_an_invalid_response_failure(endpoint):
    env = run(options(endpoint.url, DATA / "ranking_10rows.json", expect_outputs="prob"), requests=6, users=1)
    entry = env.stats.entries[("ep", INVOKE_ENDPOINT)]
    assert entry.num_failures == entry.num_requests >= 6
    (error,) = env.stats.errors.values()
    assert str(error.error).startswith("InvalidResponse: expected outputs ['prob']")


@pytest.mark.e2e
def test_validation_off_accepts_what_it_would_reject(endpoint):
    env = run(options(endpoint.url, DATA / "ranking_10rows.json", validate_response=False), requests=6, users=1)
    assert env.stats.total.num_failures == 0


@pytest.mark.e2e
def test_a_bad_option_stops_the_run_with_exit_code_2(endpoint):
    env = run(options(endpoint.url, DATA / "ranking_10rows.json", serializer="protobuff"), requests=1, users=1)
    assert env.sm_locust_payloads is None and env.process_exit_code == 2
    assert env.stats.total.num_requests == 0
