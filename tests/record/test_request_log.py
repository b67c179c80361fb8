"""`--log-requests` (sm_locust.record.requests_log): one row per request, the token accounting's figures
filled in, latency series left out, the bounds (pending rows, rotation) counted; and a run against the
local LLM emulation writing one row per request of summary.json."""

from __future__ import annotations

import gzip
import json

import pytest

from sm_locust.endpoint.llm import LlmConfig
from sm_locust.errors import UsageError
from sm_locust.invocation import InvocationError
from sm_locust.llm.tokens import RequestTokens
from sm_locust.record.requests_log import RequestLog, RotatingGzip, itl_summary
from tests.conftest import run_cli

STREAM = "InvokeEndpointWithResponseStream"


def rows(path):
    with gzip.open(path, "rt") as fh:
        return [json.loads(line) for line in fh]


def fire(log, request_type=STREAM, name="ep", t=100.0, e2e=50.0, exception=None, context=None):
    log.on_request(request_type=request_type, name=name, response_time=e2e, response_length=10, exception=exception,
                   context=context, start_time=t)


def test_one_row_per_request_with_the_token_figures(tmp_path):
    log = RequestLog(tmp_path, worker=3)
    log.accounted = True
    fire(log, "TTFT", e2e=5.0)  # a latency series: not a request
    fire(log, context={"ttft_ms": 12.0, "inter_chunk_ms": [4.0, 9.0, 5.0]})
    log.complete(RequestTokens(e2e_ms=50.0, ttft_ms=14.0, itl_ms=[3.0, 5.0, 8.0, 20.0], output_tokens=5,
                               input_tokens=30, source="server"))
    fire(log, "InterChunk", e2e=4.0)
    fire(log, t=101.5, e2e=7.0, exception=InvocationError("ThrottlingException", "Rate exceeded\x1b[2J"))
    log.complete(None, turn=2)  # a --turns conversation's second turn
    log.write_pending()
    log.writer.close()
    first, second = rows(tmp_path / "requests.jsonl.gz")
    assert first == {"t": 100.0, "type": STREAM, "name": "ep", "e2e_ms": 50.0, "ttft_ms": 14.0, "itl_p50_ms": 5.0,
                     "itl_max_ms": 20.0, "input_tokens": 30, "output_tokens": 5, "bytes": 10, "error": None,
                     "worker": 3}
    assert second["t"] == 101.5 and second["error"].startswith("ThrottlingException: Rate exceeded")
    assert "\x1b" not in second["error"] and second["output_tokens"] is None and second["ttft_ms"] is None
    assert "turn" not in first and second["turn"] == 2  # only a --turns request says its turn
    assert log.counts() == {"rows": 2, "dropped": 0, "files": 1, "file": "requests.jsonl.gz"}


def test_a_row_waits_one_round_for_its_tokens_and_chunk_timing_without_accounting(tmp_path):
    log = RequestLog(tmp_path)
    fire(log, context={"ttft_ms": 12.0, "inter_chunk_ms": [4.0, 9.0]})  # no accounting: the chunk timing
    log.accounted = True
    fire(log, t=102.0)  # its tokens not in yet
    log.write_pending()
    assert log.counts()["rows"] == 1 and len(log.pending) == 1
    log.write_pending()  # one round later it goes as it is
    log.writer.close()
    first, second = rows(tmp_path / "requests.jsonl.gz")
    assert (first["ttft_ms"], first["itl_p50_ms"], first["itl_max_ms"]) == (12.0, 4.0, 9.0)
    assert second["t"] == 102.0 and second["output_tokens"] is None


def test_pending_rows_are_bounded_and_the_dropped_counted(tmp_path):
    log = RequestLog(tmp_path, max_pending=3)
    for i in range(5):
        fire(log, t=float(i))
    log.write_all()
    fire(log, t=9.0)
    log.write_all()
    log.writer.close()
    assert [r["t"] for r in rows(tmp_path / "requests.jsonl.gz")] == [0.0, 1.0, 2.0, 9.0]
    assert log.counts()["rows"] == 4 and log.counts()["dropped"] == 2


def test_rotation_keeps_the_newest_parts_and_counts_what_it_dropped(tmp_path):
    writer = RotatingGzip(tmp_path, rotate_bytes=1, max_parts=3)  # every write fills a part
    for batch in range(5):
        writer.write([json.dumps({"batch": batch, "i": i}).encode() + b"\n" for i in range(batch + 1)])
    writer.close()
    parts = sorted(tmp_path.iterdir())
    assert [p.name for p in parts] == ["requests.1.jsonl.gz", "requests.2.jsonl.gz", "requests.jsonl.gz"]
    assert [r["batch"] for r in rows(tmp_path / "requests.2.jsonl.gz")] == [3] * 4
    assert [r["batch"] for r in rows(tmp_path / "requests.1.jsonl.gz")] == [4] * 5
    assert rows(tmp_path / "requests.jsonl.gz") == []  # the part opened after the last rotation
    assert writer.dropped == 1 + 2 + 3 and writer.rows == 4 + 5


def test_itl_summary():
    assert itl_summary([]) == (None, None) and itl_summary(None) == (None, None)
    assert itl_summary([30.0, 10.0, 20.0, 40.0]) == (20.0, 40.0)


@pytest.mark.e2e
def test_a_run_logs_one_row_per_request(endpoint_factory, tmp_path):
    received_log = tmp_path / "received.jsonl"
    ep = endpoint_factory(llm=LlmConfig(max_sequences=8, step_ms=10.0, step_ms_per_seq=1.0,
                                        request_log=str(received_log)))
    out = tmp_path / "run"
    result = run_cli("run", "--endpoint-name", "llm", "--endpoint-url", ep.url, "--prompts", "synthetic:20",
                     "--max-new-tokens", "12", "--stream", "true", "-u", "4", "-t", "5s", "--log-requests", "true",
                     "--out", str(out), timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((out / "summary.json").read_text())
    logged = rows(out / "requests.jsonl.gz")
    requests = summary["totals"]["requests"]
    assert requests > 20 and len(logged) == requests
    received = sum(1 for line in received_log.read_bytes().splitlines() if b'"prompt_tokens"' in line)
    assert requests <= received <= requests + 4  # what the endpoint received: each answered once, 4 users cut at most
    assert summary["request_log"] == {"rows": requests, "dropped": 0, "files": 1, "file": "requests.jsonl.gz"}
    assert {r["type"] for r in logged} == {STREAM} and {r["worker"] for r in logged} == {0}
    assert {r["output_tokens"] for r in logged} == {12} and {r["input_tokens"] for r in logged} == {20}
    assert all(r["ttft_ms"] <= r["e2e_ms"] and r["itl_p50_ms"] <= r["itl_max_ms"] for r in logged)
    assert all(r["error"] is None for r in logged)


def test_log_requests_needs_a_run_folder():
    from sm_locust.config.options import parse_options
    from sm_locust.locustfiles.sagemaker import check_startup

    options = parse_options({"endpoint_name": "ep", "endpoint_url": "http://127.0.0.1:9", "log_requests": True,
                             "payload": "", "prompts": "synthetic:4"})
    with pytest.raises(UsageError, match="--log-requests writes requests.jsonl.gz into the run folder; give --sm-out"):
        check_startup(options, web_ui=False)
