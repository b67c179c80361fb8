"""Issue 29's "done when" for Triton, end to end: `sm-locust run` against `sm-locust serve --protocol triton`.

Requests come from an .npz (int64 token ids and masks, sent as INT32, 4 rows per body), in both
kinds; answers are validated (names, shape, rows); the endpoint's own counters say how many rows it
decoded, which must be 4 per request it answered, with 0 refused. A malformed request (a value
INT32 cannot hold) is refused before the test with one line and exit 2; a request the model refuses
at run time is counted under SageMaker's name for it, ModelError, with Triton's status.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from sm_locust.endpoint.server import LocalEndpoint
from tests.conftest import assert_one_line_error, discard, run_cli

pytestmark = pytest.mark.e2e
ROWS = 4


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory):
    ep = LocalEndpoint(log_path=tmp_path_factory.mktemp("triton") / "endpoint.log", protocol="triton",
                       model_inputs="input_ids:INT32:-1,512;attention_mask:INT32:-1,512", max_batch_size=8,
                       max_batch_delay_ms=1, max_concurrency=2, service_time_ms=2).start()
    yield ep
    discard(ep)


@pytest.fixture(scope="module")
def npz(tmp_path_factory):
    path = tmp_path_factory.mktemp("bert") / "bert.npz"
    rng = np.random.default_rng(29)
    np.savez(path, input_ids=rng.integers(0, 30522, (40, 512)), attention_mask=np.ones((40, 512), np.int64))
    return path


def run(endpoint, npz, tmp_path, serializer, *extra):
    out = tmp_path / serializer
    result = run_cli("run", "--endpoint-name", "bert", "--endpoint-url", endpoint.url, "--payload", str(npz),
                     "--serializer", serializer, "--input-datatypes", "input_ids=INT32,attention_mask=INT32",
                     "--output-names", "logits", "--batch-size", str(ROWS), "--max-bodies", "8",
                     "--validate-response", "on", "--expect-outputs", "logits", "--expect-shape", "N,2",
                     "-u", "4", "-t", "2s", "--out", str(out), "-q", *extra, timeout=90)
    return result, out


@pytest.mark.parametrize("serializer", ["triton", "triton-json"])
def test_every_request_decodes_with_its_rows_and_every_answer_validates(endpoint, npz, tmp_path, serializer):
    before = endpoint.stats()
    result, out = run(endpoint, npz, tmp_path, serializer)
    assert result.returncode == 0, result.stdout + result.stderr
    after = endpoint.stats()
    totals = json.loads((out / "summary.json").read_text())["totals"]
    served = after["successes"] - before["successes"]
    assert totals["failures"] == 0 and totals["errors"] == {}
    assert totals["requests"] > 20
    assert after["ModelError"] == before["ModelError"]  # 0 refused by the model
    assert totals["requests"] <= served <= totals["requests"] + totals["in_flight_at_stop"]
    assert after["rows"] - before["rows"] == ROWS * served  # every request decoded with its 4 rows
    assert after["batches"] > before["batches"]  # Triton's batcher ran


def test_a_value_the_datatype_cannot_hold_is_refused_before_the_test(endpoint, tmp_path):
    path = tmp_path / "big.npz"
    np.savez(path, input_ids=np.full((4, 512), 2**31, np.int64), attention_mask=np.ones((4, 512), np.int64))
    before = endpoint.stats()["requests"]
    result, out = run(endpoint, path, tmp_path, "triton")
    assert_one_line_error(result, 2, "int64 values cannot be sent as INT32 without changing them", "2147483648")
    assert not out.exists() and endpoint.stats()["requests"] == before


def test_a_request_the_model_refuses_is_a_modelerror_with_tritons_status(endpoint, npz, tmp_path):
    result, out = run(endpoint, npz, tmp_path, "triton", "--batch-size", "16")  # max_batch_size is 8
    summary = json.loads((out / "summary.json").read_text())
    assert summary["totals"]["requests"] == summary["totals"]["failures"] > 0
    assert list(summary["totals"]["errors"]) == ["ModelError"]
    failures = (out / "locust_failures.csv").read_text()
    assert "ModelError: (original status 400) Received client error (400) from primary with message" in failures
    assert "inference request batch-size must be <= 8" in failures
