"""`sm-locust run --async-result s3` end to end: the local endpoint queues (`serve --async`), moto is S3.

Done when: results counted = results written (give or take those awaited at the stop); failures =
failure objects, named; the time to result's p50 within the polling resolution of the endpoint's
own; its interval in summary.json; a missing input object fails every request, named, none a success.
"""

from __future__ import annotations

import json

import pytest

from sm_locust.endpoint.asyncqueue import TIME_TO_RESULT_KEY, AsyncEndpointConfig
from sm_locust.endpoint.server import LocalEndpoint
from sm_locust.measure.steady import histogram_percentile
from sm_locust.plateau.synthetic import locust_bucket
from tests.conftest import SAMPLE_PAYLOAD, run_cli
from tests.fakes import moto_with_input

BUCKET = "async-run"


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    yield from moto_with_input(tmp_path_factory.mktemp("moto"), BUCKET, SAMPLE_PAYLOAD.read_bytes())


def _run(moto, tmp_path, prefix: str, input_key: str):
    config = AsyncEndpointConfig(output_path=f"s3://{BUCKET}/{prefix}/out", failure_path=f"s3://{BUCKET}/{prefix}/err",
                                 max_concurrent=2, s3_url=moto.url)
    with LocalEndpoint(log_path=tmp_path / "endpoint.log", service_time_ms=150, async_inference=config) as ep:
        result = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", ep.url, "--payload", str(SAMPLE_PAYLOAD),
                         "-u", "3", "-t", "6s", "--async-input-location", f"s3://{BUCKET}/{input_key}",
                         "--async-result", "s3", "--async-poll-ms", "40", "--out", str(tmp_path / "run"),
                         env=moto.env())
        stats = ep.stats()
    assert result.returncode in (0, 1), result.stdout + result.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    return result, summary, stats


def _cut_short(summary) -> int:
    """Calls the stop cut short (`totals.in_flight_at_stop`): the endpoint may have queued one whose 202 its
    user never read, so it is in the endpoint's counts and not the client's (CI's two-process sqs run: 58
    queued, 57 accepted seen)."""
    return int(summary["totals"].get("in_flight_at_stop") or 0)


@pytest.mark.e2e
def test_results_and_time_to_result_against_the_endpoints_own(moto, tmp_path):
    result, summary, stats = _run(moto, tmp_path, "ok", "in/request.json")
    figures = summary["async"]
    written = moto.keys(BUCKET, "ok/out/")
    cut = _cut_short(summary)
    assert 0 < figures["accepted"] <= stats["async_accepted"] <= figures["accepted"] + cut
    assert stats["async_results"] == len(written)
    assert figures["results"] <= len(written) <= figures["results"] + figures["awaited_at_stop"] + cut
    assert figures["failures"] == stats["async_failures"] == 0 and figures["failed"] == {}
    assert summary["totals"]["requests"] == figures["results"]  # one InvokeEndpointAsync entry per result
    s3 = moto.client()
    own = {}
    for key in written:
        ms = float(s3.head_object(Bucket=BUCKET, Key=f"ok/out/{key.split('/')[-1]}")["Metadata"][TIME_TO_RESULT_KEY])
        own[locust_bucket(ms)] = own.get(locust_bucket(ms), 0) + 1
    own_p50 = histogram_percentile(own, 50)
    ttr = figures["time_to_result"]
    # each call's time to result = its 202's latency + the endpoint's own + at most its poll resolution
    # (+ 10 ms: Locust's buckets are 10 ms wide from 100 ms up)
    slack = figures["poll_resolution_max_ms"] + figures["acceptance"]["p99_ms"] + 10
    assert own_p50 - 10 <= ttr["p50_ms"] <= own_p50 + slack, (figures, own)
    low, high = ttr["ci95"]["p50_ms"]
    assert low <= ttr["p50_ms"] <= high
    assert figures["polls"] >= figures["results"]
    assert any(line.startswith("sm-locust: async: accepted ") for line in result.stdout.splitlines()), result.stdout


@pytest.mark.e2e
def test_a_missing_input_object_fails_every_request_named(moto, tmp_path):
    _, summary, stats = _run(moto, tmp_path, "missing", "in/missing.json")
    figures = summary["async"]
    failure_objects = moto.keys(BUCKET, "missing/err/")
    assert figures["results"] == 0 == stats["async_results"] and summary["totals"]["successes"] == 0
    [(name, count)] = figures["failed"].items()
    assert name.startswith("AsyncFailure: ") and "NoSuchKey" in name
    assert count == figures["failures"] == summary["totals"]["failures"] > 0
    assert count <= len(failure_objects) == stats["async_failures"] <= (
        count + figures["awaited_at_stop"] + _cut_short(summary))
    assert figures["accepted"] == count + figures["awaited_at_stop"]  # each call answered or awaited, once
    assert summary["totals"]["errors"] == {"AsyncFailure": count}  # Locust's error table: by code


@pytest.mark.e2e
@pytest.mark.parametrize("processes", [None, 2])
def test_results_through_the_notifications_without_polling_s3(moto, tmp_path, processes):
    """`--async-result sqs:QUEUE_URL`: the endpoint's topics subscribed to a queue; every result counted
    was announced, none polled in S3, the time to result as the endpoint's own (plus the delivery). With
    two Locust worker processes each reads the one queue and hands the other's notifications back."""
    import boto3

    def aws(service):
        return boto3.client(service, endpoint_url=moto.url, region_name="us-east-1",
                            aws_access_key_id="testing", aws_secret_access_key="testing")

    sns, sqs = aws("sns"), aws("sqs")
    queue = sqs.create_queue(QueueName=f"run-results-{processes}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    topics = [sns.create_topic(Name=f"{name}-{processes}")["TopicArn"] for name in ("run-ok", "run-failed")]
    for topic in topics:
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)
    config = AsyncEndpointConfig(output_path=f"s3://{BUCKET}/sqs-{processes}/out", max_concurrent=2, s3_url=moto.url,
                                 success_topic=topics[0], error_topic=topics[1], sns_url=moto.url)
    with LocalEndpoint(log_path=tmp_path / "endpoint.log", service_time_ms=150, async_inference=config) as ep:
        result = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", ep.url, "--payload", str(SAMPLE_PAYLOAD),
                         "-u", "3", "-t", "8s", "--async-input-location", f"s3://{BUCKET}/in/request.json",
                         "--async-result", f"sqs:{queue}", "--async-timeout", "4", "--out", str(tmp_path / "run"),
                         *(["--processes", str(processes)] if processes else []),
                         env={**moto.env(), "AWS_ENDPOINT_URL_SQS": moto.url})
        stats = ep.stats()
    assert result.returncode in (0, 1), result.stdout + result.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    figures = summary["async"]
    cut = _cut_short(summary)
    assert 0 < figures["accepted"] <= stats["async_accepted"] <= figures["accepted"] + cut
    # a notification lost (deleted by the other process, say) would be an AsyncTimeout after 4 s
    assert figures["results"] > 0 and figures["failures"] == 0 and figures["polls"] == 0, figures["failed"]
    assert stats["async_notifications"] == stats["async_results"]
    assert figures["results"] <= stats["async_results"] <= figures["results"] + figures["awaited_at_stop"] + cut
    assert figures["accepted"] == figures["results"] + figures["awaited_at_stop"]  # answered or awaited, once
    s3 = moto.client()
    own = {}
    for key in moto.keys(BUCKET, f"sqs-{processes}/out/"):
        ms = float(s3.head_object(Bucket=BUCKET, Key=key)["Metadata"][TIME_TO_RESULT_KEY])
        own[locust_bucket(ms)] = own.get(locust_bucket(ms), 0) + 1
    own_p50, ttr = histogram_percentile(own, 50), figures["time_to_result"]
    slack = figures["poll_resolution_max_ms"] + figures["acceptance"]["p99_ms"] + 10  # the delivery, the 202
    assert own_p50 - 10 <= ttr["p50_ms"] <= own_p50 + slack, (figures, own)


@pytest.mark.e2e
def test_the_async_search_stops_where_the_backlog_grows(moto, tmp_path):
    """`--shape async` against 2 workers of 200 ms (at most 10 results/s): rate steps of 3 req/s until
    the backlog's slope is shown above 0; the capacity named is below what the workers can do."""
    config = AsyncEndpointConfig(output_path=f"s3://{BUCKET}/search/out", max_concurrent=2, s3_url=moto.url)
    with LocalEndpoint(log_path=tmp_path / "endpoint.log", service_time_ms=200, async_inference=config) as ep:
        result = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", ep.url, "--payload", str(SAMPLE_PAYLOAD),
                         "--shape", "async", "--start-rps", "3", "--max-rps", "30", "--step-seconds", "10",
                         "--max-duration", "150", "--async-input-location", f"s3://{BUCKET}/in/request.json",
                         "--async-result", "s3", "--async-poll-ms", "40", "--out", str(tmp_path / "run"),
                         env=moto.env())
    assert result.returncode in (0, 1), result.stdout + result.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    search = summary["async_search"]
    steps = search["steps"]
    assert [s["rate_rps"] for s in steps] == [3.0 * (i + 1) for i in range(len(steps))]
    assert steps[-1]["backlog"] == "grows" and steps[-1]["backlog_slope_ci95"][0] > 0, search
    assert all(s["backlog"] != "grows" for s in steps[:-1])
    assert "backlog grows" in search["stop_reason"] and "backlog grows" in summary["stop_reason"]
    assert search["capacity_rps"] is None or search["capacity_rps"] <= 10  # 2 workers x 5 results/s
    assert search["grows_at_rps"] == steps[-1]["rate_rps"] > (search["capacity_rps"] or 0)
    backlog = summary["async"]["backlog"]
    assert summary["async"]["backlog_every_s"] == 1 and max(backlog) == summary["async"]["backlog_max"] > 0
    assert any(line.startswith("sm-locust: step ") or "step " in line for line in result.stdout.splitlines())


@pytest.mark.e2e
@pytest.mark.parametrize(("slo_ms", "verdict"), [(60, "breach"), (1000, "keeps")])
def test_the_async_search_judges_the_time_to_result_slo_on_its_interval(moto, tmp_path, slo_ms, verdict):
    """`--time-to-result-slo-ms` against 1 worker of 100 ms at 3 req/s: every result takes longer than
    60 ms (the first step breaks that SLO and ends the search, no capacity), and far less than 1 s (the
    step keeps it, held longer if its first window was too short to say so: the capacity is the one
    rate tried when its backlog is shown bounded too)."""
    config = AsyncEndpointConfig(output_path=f"s3://{BUCKET}/slo{slo_ms}/out", max_concurrent=1, s3_url=moto.url)
    with LocalEndpoint(log_path=tmp_path / "endpoint.log", service_time_ms=100, async_inference=config) as ep:
        result = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", ep.url, "--payload", str(SAMPLE_PAYLOAD),
                         "--shape", "async", "--start-rps", "3", "--max-rps", "3", "--step-seconds", "9",
                         "--time-to-result-slo-ms", str(slo_ms), "--slo-percentile", "50", "--max-duration", "60",
                         "--async-input-location", f"s3://{BUCKET}/in/request.json",
                         "--async-result", "s3", "--async-poll-ms", "40", "--out", str(tmp_path / "run"),
                         env=moto.env())
    assert result.returncode in (0, 1), result.stdout + result.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    search = summary["async_search"]
    (step,) = search["steps"]
    assert step["slo"] == verdict and step["extensions"] <= 2, search
    assert (search["time_to_result_slo_ms"], search["slo_percentile"]) == (slo_ms, 50.0)
    low, high = step["time_to_result_ci95"]
    assert low <= step["time_to_result_ms"] <= high and step["results"] + step["awaited"] >= 10
    if verdict == "breach":
        assert low > slo_ms and search["capacity_rps"] is None and search["slo_breach_at_rps"] == 3.0
        # a call still awaited past the SLO at the judgment is named (", N awaited past it": its time to
        # result is surely above the SLO); how many there are depends on when the judgment falls
        awaited = f", {step['awaited']} awaited past it" if step["awaited"] else ""
        assert search["stop_reason"].startswith("at 3 req/s the p50 time to result ")
        assert search["stop_reason"].endswith(f"above the SLO 60 ms{awaited}: capacity below 3 req/s")
    else:
        assert high <= slo_ms and search["slo_breach_at_rps"] is None
        # the capacity needs the backlog shown bounded too (7 changes may be too few to show it)
        assert search["capacity_rps"] == (3.0 if step["backlog"] == "bounded" else None)
        assert search["stop_reason"].startswith("max rate 3 req/s reached")
    assert search["verdict"] == "conclusive" and "step 1: 3 req/s" in result.stdout
    # the client-side backlog per second is in timeline.jsonl too
    lines = [json.loads(line) for line in (tmp_path / "run" / "timeline.jsonl").read_text().splitlines()]
    backlog = [line["async_backlog"] for line in lines if "async_backlog" in line]
    assert len(backlog) >= len(lines) - 2  # every second once calls waited
    assert 0 <= min(backlog) and max(backlog) <= summary["async"]["accepted"]


@pytest.mark.e2e
@pytest.mark.parametrize(("input_key", "invalid"), [("in/request.json", False), ("in/rows50.json", True)])
def test_async_fetch_validates_each_output_like_a_synchronous_answer(moto, tmp_path, input_key, invalid):
    """`--async-fetch --validate-response`: each result's output object is read and checked, its rows
    against the request's (10); an input object of 50 rows gives answers of 50: each call an
    InvalidResponse failure, never a success."""
    moto.client().put_object(Bucket=BUCKET, Key="in/rows50.json",
                             Body=(SAMPLE_PAYLOAD.parent / "ranking_50rows.json").read_bytes())
    config = AsyncEndpointConfig(output_path=f"s3://{BUCKET}/fetch-{int(invalid)}/out", max_concurrent=2,
                                 s3_url=moto.url)
    with LocalEndpoint(log_path=tmp_path / "endpoint.log", service_time_ms=50, async_inference=config) as ep:
        result = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", ep.url, "--payload", str(SAMPLE_PAYLOAD),
                         "-u", "2", "-t", "5s", "--async-input-location", f"s3://{BUCKET}/{input_key}",
                         "--async-result", "s3", "--async-poll-ms", "40", "--async-fetch", "true",
                         "--validate-response", "true", "--out", str(tmp_path / "run"), env=moto.env())
        stats = ep.stats()
    assert result.returncode in (0, 1), result.stdout + result.stderr
    figures = json.loads((tmp_path / "run" / "summary.json").read_text())["async"]
    answered = figures["results"] + figures["failures"]
    assert stats["async_results"] >= answered > 0
    if invalid:
        assert figures["results"] == 0 and list(figures["failed"]) and all(
            name.startswith("InvalidResponse") for name in figures["failed"]), figures["failed"]
    else:
        assert figures["failures"] == 0 and figures["results"] > 0, figures["failed"]
