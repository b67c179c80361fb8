"""What a request is: logical invocations everywhere (totals, per name, error rates, gates), a stream's
TTFT / InterChunk entries as latency series beside them, fan-out parts out of the totals; and the
gates read summary.json's exact per-name figures, not the lagging locust_stats.csv."""

from __future__ import annotations

import json

import locust  # noqa: F401  (gevent patching first)
from locust import task
from locust.env import Environment

import pytest

from sm_locust.gates import MaxErrorRate, MaxLatency, MinRps, evaluate
from sm_locust.invocation import (
    INTER_CHUNK,
    INVOKE_ENDPOINT,
    INVOKE_ENDPOINT_STREAM,
    TTFT,
    Invocation,
    InvocationError,
    is_invocation,
)
from sm_locust.record.recorder import RunRecorder, per_name
from sm_locust.record.runfolder import load_run
from sm_locust.testing import run_load_test
from sm_locust.users import SageMakerUser
from sm_locust.users.fanout import INVOKE_ENDPOINT_SPLIT
from tests.conftest import SAMPLE_PAYLOAD, run_cli
from tests.fakes import write_run_folder as write_run
from tests.starved import gates_held_by_the_load_generator, verdicts_held_by_the_load_generator


def fire(environment, request_type, name, ms=10.0, error=None, length=5):
    environment.events.request.fire(request_type=request_type, name=name, response_time=ms, response_length=length,
                                    exception=error, context={})


def test_the_counting_rule():
    assert is_invocation(INVOKE_ENDPOINT, "ep") and is_invocation(INVOKE_ENDPOINT_STREAM, "ep")
    assert is_invocation(INVOKE_ENDPOINT_SPLIT, "ep") and is_invocation("GET", "/custom")
    assert not is_invocation(TTFT, "ep") and not is_invocation(INTER_CHUNK, "ep")
    assert not is_invocation(INVOKE_ENDPOINT, "ep/part")


@pytest.mark.e2e
def test_a_stream_counts_once_and_its_failures_per_stream():
    """Three streams, one failed mid-stream: 3 requests and 33 % errors, not 9 "requests" and 11 %."""
    environment = Environment()
    runner = environment.create_local_runner()
    recorder = RunRecorder(environment, None, endpoint="ep")
    for failed in (False, False, True):
        fire(environment, TTFT, "ep", ms=2.0)
        fire(environment, INTER_CHUNK, "ep", ms=1.0)
        fire(environment, INVOKE_ENDPOINT_STREAM, "ep", ms=20.0,
             error=InvocationError("ModelStreamError", "injected") if failed else None)
    for _ in range(2):  # a fan-out call: its parts are inside it
        fire(environment, INVOKE_ENDPOINT, "other/part")
        fire(environment, INVOKE_ENDPOINT, "other/part", error=InvocationError("ThrottlingException", "Rate exceeded"))
        fire(environment, INVOKE_ENDPOINT_SPLIT, "other", error=InvocationError("ThrottlingException", "Rate exceeded"))
    totals, errors = recorder.totals()
    assert (totals["requests"], totals["failures"]) == (5, 3)
    assert totals["p50_ms"] == 20  # the streams' and split calls' response times, not the 1-2 ms series
    assert errors == {"ThrottlingException": 2, "ModelStreamError": 1}

    recorder.started_at, recorder.ended_at = 100.0, 110.0
    summary = recorder.summary()
    assert summary["totals"]["successes"] == 2 and summary["totals"]["goodput_rps"] == 0.2
    assert summary["totals"]["error_rate"] == pytest.approx(0.6)
    ep = summary["by_name"]["ep"]
    assert (ep["requests"], ep["failures"], ep["successes"]) == (3, 1, 2)
    assert ep["request_types"] == [INVOKE_ENDPOINT_STREAM] and ep["errors"] == {"ModelStreamError": 1}
    assert ep["rps"] == 0.3 and ep["goodput_rps"] == 0.2
    assert ep["latency_series"]["TTFT"]["count"] == 3 and ep["latency_series"]["TTFT"]["p95_ms"] == 2
    assert summary["latency_series"]["InterChunk"]["count"] == 3
    assert summary["by_name"]["other/part"]["requests"] == 4  # the endpoint's view keeps its own name
    assert summary["by_name"]["other"]["request_types"] == [INVOKE_ENDPOINT_SPLIT]
    runner.quit()


@pytest.mark.e2e
def test_per_name_merges_request_types_of_one_name():
    environment = Environment()
    environment.create_local_runner()
    fire(environment, INVOKE_ENDPOINT, "ep")
    fire(environment, INVOKE_ENDPOINT_STREAM, "ep", error=InvocationError("ModelError", "(original status 400)"))
    record = per_name(environment.stats, 2.0)["ep"]
    assert (record["requests"], record["failures"], record["rps"]) == (2, 1, 1.0)
    assert record["request_types"] == [INVOKE_ENDPOINT, INVOKE_ENDPOINT_STREAM]


# -- gates on summary.json's exact figures ---------------------------------------------------------

STREAM_SUMMARY = {
    "schema": 1, "duration_s": 5.0,
    "totals": {"requests": 822, "failures": 270, "rps": 164.4, "p50_ms": 8, "p95_ms": 11, "p99_ms": 12},
    "by_name": {"ep": {"requests": 822, "failures": 270, "rps": 164.4, "goodput_rps": 110.4, "p50_ms": 8,
                       "p95_ms": 11, "p99_ms": 12, "latency_series": {"TTFT": {"count": 822, "p95_ms": 2}}}},
}
# locust_stats.csv written a moment before the end: it lags, and holds one row per (type, name)
LAGGING_ROWS = [
    {"Type": INVOKE_ENDPOINT_STREAM, "Name": "ep", "Request Count": "747", "Failure Count": "240",
     "Requests/s": "149.4",
     "50%": "8", "95%": "11", "99%": "12"},
    {"Type": TTFT, "Name": "ep", "Request Count": "747", "Failure Count": "0", "Requests/s": "149.4",
     "50%": "1", "95%": "2", "99%": "3"},
    {"Type": INTER_CHUNK, "Name": "ep", "Request Count": "747", "Failure Count": "0", "Requests/s": "149.4",
     "50%": "2", "95%": "3", "99%": "4"},
    {"Type": "", "Name": "Aggregated", "Request Count": "2241", "Failure Count": "240", "Requests/s": "448.2",
     "50%": "2", "95%": "10", "99%": "12"},
]


def test_gates_read_the_exact_per_name_counts_not_the_csv(tmp_path):
    run = load_run(write_run(tmp_path / "run", STREAM_SUMMARY, LAGGING_ROWS))
    ep = run.by_name["ep"]
    assert (ep.requests, ep.failures, ep.goodput_rps) == (822, 270, 110.4)
    verdicts = evaluate([MinRps(110, "ep"), MinRps(111, "ep"), MaxErrorRate(0.3, "ep"), MaxLatency(95, 10, "ep")], run)
    assert [v.passed for v in verdicts] == [True, False, False, False]
    assert verdicts[2].observed == "32.85% (270/822)"
    assert "p95 was 11 ms" in verdicts[3].message  # the stream's p95, not TTFT's 2 ms


def test_an_older_run_falls_back_to_the_csv_without_latency_series_rows(tmp_path):
    older = {key: value for key, value in STREAM_SUMMARY.items() if key != "by_name"}
    run = load_run(write_run(tmp_path / "run", older, LAGGING_ROWS))
    ep = run.by_name["ep"]
    assert (ep.requests, ep.failures, ep.p95_ms) == (747, 240, 11)
    assert ep.goodput_rps == pytest.approx(149.4 * (747 - 240) / 747)


# -- end to end: streams against the local endpoint ------------------------------------------------

class StreamUser(SageMakerUser):
    abstract = True  # made concrete in the test (run_load_test takes it as is)
    body = SAMPLE_PAYLOAD.read_bytes()

    @task
    def stream(self) -> None:
        self.client.invoke_stream(Invocation(body=self.body))


@pytest.mark.e2e
def test_stream_failures_count_per_stream_in_process(endpoint_factory):
    ep = endpoint_factory(stream_error_ratio=0.33, seed=11, stream_tokens=4, token_ms=2)
    user = type("Streams", (StreamUser,), {"abstract": False, "__module__": __name__})
    result = run_load_test([user], users=2, run_time_s=2.5, options={"endpoint_name": "ep", "endpoint_url": ep.url})
    totals = result.totals
    server = ep.stats()
    # one request per stream: what the server answered, less at most one stream per user cut at the stop
    assert server["invocations"] - 2 <= totals["requests"] <= server["invocations"]
    assert totals["requests"] > 30
    assert 0.15 < totals["failures"] / totals["requests"] < 0.5  # ~33 % of the streams failed
    assert set(result.errors) == {"ModelStreamError"}
    assert result.summary["by_name"]["ep"]["requests"] == totals["requests"]
    assert result.summary["latency_series"]["TTFT"]["count"] <= totals["requests"] + 2  # a cut stream had its TTFT
    verdicts = result.check(max_error_rate=0.1, max_p95_ms={"ep": 5000})
    if not verdicts_held_by_the_load_generator(result.summary, verdicts):  # else starved, verified: said so
        assert [v.gate for v in verdicts if not v.passed] == ["error rate <= 10.00% (all requests)"]


@pytest.mark.e2e
def test_smoke_fails_a_stream_run_whose_streams_fail_too_often(endpoint_factory, tmp_path):
    """The issue's case: 33 % of the streams fail; `--max-error-rate 0.2` must fail the run."""
    ep = endpoint_factory(stream_error_ratio=0.33, seed=5, stream_tokens=4, token_ms=2)
    out = tmp_path / "run"
    result = run_cli("smoke", "--endpoint-name", "ep", "--endpoint-url", ep.url, "--payload", str(SAMPLE_PAYLOAD),
                     "--stream", "true", "--max-error-rate", "0.2", "-u", "2", "-t", "3s", "--out", str(out))
    assert result.returncode == 1, result.stdout + result.stderr
    summary = json.loads((out / "summary.json").read_text())
    if not gates_held_by_the_load_generator(summary, result.stdout):  # else starved, verified: said so
        assert "FAIL error rate <= 20.00% (all requests)" in result.stdout
    totals = summary["totals"]
    assert 0.2 < totals["failures"] / totals["requests"] < 0.5
    assert totals["requests"] <= ep.stats()["invocations"]  # streams, not streams x 3
    assert set(summary["latency_series"]) == {"TTFT", "InterChunk"}
