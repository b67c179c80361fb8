"""`--transport fast|boto3` through the default locustfile: the same entries and error names.

`sm-locust run` against the local endpoint with faults on, once per transport: the failures are
counted under the same codes, and each run counts exactly what the server answered (no retries on
either path). Then `--stream true` through both transports: TTFT / InterChunk /
InvokeEndpointWithResponseStream entries and ModelStreamError failures from the streaming route.
The two transports' runs share one endpoint per configuration (module fixtures: a start costs ~1 s);
each run is compared with the difference of the endpoint's counters across it.
"""

from __future__ import annotations

import json
import re

import pytest

from sm_locust.config.endpoint import SageMakerSettings
from sm_locust.endpoint.server import LocalEndpoint
from sm_locust.errors import UnknownNameError
from sm_locust.transport import DEFAULT_TRANSPORT, TRANSPORTS, create_client
from sm_locust.transport.fast import FastSageMakerClient
from tests.conftest import SAMPLE_PAYLOAD, discard, run_cli

FAULTS = {"throttle_ratio": 0.15, "error_ratio": 0.15, "model_error_ratio": 0.1}
CODES = {"ThrottlingException", "InternalFailure", "ServiceUnavailable", "ModelError"}


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    ep = LocalEndpoint(log_path=tmp_path_factory.mktemp("faulty") / "endpoint.log", seed=5, **FAULTS).start()
    yield ep
    discard(ep)


@pytest.fixture(scope="module")
def streaming(tmp_path_factory):
    ep = LocalEndpoint(log_path=tmp_path_factory.mktemp("streaming") / "endpoint.log", first_token_ms=5, token_ms=1,
                       stream_error_ratio=0.2, seed=2).start()
    yield ep
    discard(ep)


def _run(url: str, out, *extra: str) -> tuple[dict, dict]:
    """summary.json and {(request type, name): requests} from Locust's final table in locust.log
    (the CSV can miss the last second of a short run, docs/facts.md)."""
    result = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", url, "--payload", str(SAMPLE_PAYLOAD),
                     "-u", "3", "-r", "30", "-t", "2s", "--out", str(out), "-q", *extra)
    assert result.returncode in (0, 1), result.stdout + result.stderr  # 1: the run had failures
    assert "Traceback" not in result.stderr, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    log = (out / "locust.log").read_text()
    table = log[log.rindex("# reqs"):] if "# reqs" in log else ""
    rows = {(m[1], m[2]): int(m[3]) for m in re.finditer(r"^(\S+)\s+(ep)\s+(\d+)\s", table, re.M)}
    return summary, rows


@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_same_error_codes_with_either_transport(faulty, tmp_path, transport):
    before = faulty.stats()
    summary, rows = _run(faulty.url, tmp_path / transport, "--transport", transport)
    errors = summary["totals"]["errors"]
    assert set(errors) == CODES, errors
    server = faulty.stats()
    for code in ("ThrottlingException", "ModelError", "InternalFailure", "ServiceUnavailable"):
        assert errors[code] <= server[code] - before[code]  # the CSV may miss the last second; never more than served
    assert ("InvokeEndpoint", "ep") in rows
    options = json.loads((tmp_path / transport / "options.json").read_text())
    assert options["sm_locust"].get("transport", DEFAULT_TRANSPORT) == transport


@pytest.mark.parametrize("transport", list(TRANSPORTS))
def test_stream_option_calls_the_streaming_route(streaming, tmp_path, transport):
    summary, rows = _run(streaming.url, tmp_path / transport, "--transport", transport, "--stream", "true")
    for kind in ("TTFT", "InterChunk", "InvokeEndpointWithResponseStream"):
        assert rows.get((kind, "ep"), 0) > 0, (kind, rows)
    assert ("InvokeEndpoint", "ep") not in rows
    assert set(summary["totals"]["errors"]) == {"ModelStreamError"}


def test_default_transport_is_declared_once():
    assert SageMakerSettings().transport == DEFAULT_TRANSPORT
    assert TRANSPORTS.get("fast") is FastSageMakerClient
    with pytest.raises(UnknownNameError, match="unknown transport 'http2'; choose one of: boto3, fast"):
        create_client("http2", None, "ep")
