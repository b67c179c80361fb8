"""Run folders to S3 and back: `sm-locust run --upload s3://...` and `sm-locust report s3://...`.

The S3 functions are tested in-process against moto (`mock_aws`) or a botocore Stubber; the
commands run as processes against a moto server on 127.0.0.1 (`AWS_ENDPOINT_URL_S3`), with the
local endpoint as the load target: the upload at the end, after a failure and after SIGTERM (what
Kubernetes sends when a Job is deleted or hits its deadline), and the one-line errors that must
come before the test starts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from sm_locust.aws.s3 import MARKER_NAME, S3Location, check_writable, download_folder, fetch_run, upload_folder
from sm_locust.errors import RunError, UsageError
from sm_locust.util.ports import free_port
from tests.conftest import SAMPLE_PAYLOAD, assert_one_line_error, run_cli
from tests.fakes import MotoServer

BIN = Path(sys.executable).parent
BUCKET = "sm-locust-results"




@pytest.fixture(scope="module")
def moto_server(tmp_path_factory):
    server = MotoServer(tmp_path_factory.mktemp("moto") / "moto.log")
    server.client().create_bucket(Bucket=BUCKET)
    yield server
    server.stop()


@pytest.fixture
def s3():
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield client


def run_folder(path: Path) -> Path:
    (path / "sub").mkdir(parents=True)
    (path / "summary.json").write_text(json.dumps({"totals": {"requests": 3}}))
    (path / "locust_stats.csv").write_text("Type,Name\n")
    (path / "sub" / "nested.txt").write_bytes(b"\x00\x01")
    return path


# -- URLs ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("url, bucket, prefix", [
    ("s3://bucket", "bucket", ""),
    ("s3://my.bucket-1/runs/", "my.bucket-1", "runs"),
    ("s3://b12/a/b/c", "b12", "a/b/c"),
])
def test_s3_urls_parse(url, bucket, prefix):
    location = S3Location.parse(url)
    assert (location.bucket, location.prefix) == (bucket, prefix)
    assert location.child("run-1").url == f"s3://{bucket}/{prefix + '/' if prefix else ''}run-1"


@pytest.mark.parametrize("url, needle", [
    ("", "is empty"),
    ("bucket/prefix", "not an s3:// URL"),
    ("https://bucket.s3.amazonaws.com/p", "not an s3:// URL"),
    ("s3:/bucket/p", "names no bucket"),
    ("s3://", "names no bucket"),
    ("s3://Bad_Bucket/p", "not a valid S3 bucket name"),
    ("s3://ab/p", "not a valid S3 bucket name"),
    ("s3://CHANGE-ME/sm-locust", "not a valid S3 bucket name"),
    ("s3://bucket/a//b", "empty, '.' or '..'"),
    ("s3://bucket/a/../b", "empty, '.' or '..'"),
    ("s3://bucket/p?versionId=1", "query or fragment"),
])
def test_malformed_s3_urls_name_the_problem(url, needle):
    with pytest.raises(UsageError, match="--upload") as info:
        S3Location.parse(url)
    assert needle in info.value.message


# -- the S3 functions, against moto in-process ------------------------------------------------------

@pytest.mark.e2e
def test_check_writable_puts_and_removes_its_marker(s3):
    location = S3Location(BUCKET, "runs/run-1")
    check_writable(location, s3)
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET)


@pytest.mark.e2e
def test_a_missing_bucket_is_a_usage_error(s3):
    with pytest.raises(UsageError, match="bucket 'no-such-bucket' does not exist"):
        check_writable(S3Location("no-such-bucket", "runs"), s3)


def test_a_bucket_that_refuses_writes_is_a_usage_error_naming_the_permission():
    client = boto3.client("s3", region_name="us-east-1")
    with Stubber(client) as stub:
        stub.add_client_error("put_object", service_error_code="AccessDenied", service_message="Access Denied",
                              http_status_code=403)
        with pytest.raises(UsageError) as info:
            check_writable(S3Location(BUCKET, "runs/r1"), client)
    assert info.value.message == (f"cannot write to s3://{BUCKET}/runs/r1: AccessDenied (the role or user needs "
                                  f"s3:PutObject on arn:aws:s3:::{BUCKET}/runs/r1/*)")


def test_only_put_is_required_a_refused_delete_is_fine():
    client = boto3.client("s3", region_name="us-east-1")
    with Stubber(client) as stub:
        stub.add_response("put_object", {})
        stub.add_client_error("delete_object", service_error_code="AccessDenied", http_status_code=403)
        check_writable(S3Location(BUCKET, "runs/r1"), client)


@pytest.mark.e2e
def test_upload_then_fetch_round_trips_a_run_folder(s3, tmp_path):
    folder = run_folder(tmp_path / "run-1")
    transfer = upload_folder(folder, S3Location(BUCKET, "runs/run-1"), s3)
    assert transfer.files == 3
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"])
    assert keys == ["runs/run-1/locust_stats.csv", "runs/run-1/sub/nested.txt", "runs/run-1/summary.json"]
    head = s3.head_object(Bucket=BUCKET, Key="runs/run-1/summary.json")
    assert head["ContentType"] == "application/json"
    # a leftover marker, a folder marker and a key that would escape the destination are not downloaded
    s3.put_object(Bucket=BUCKET, Key=f"runs/run-1/{MARKER_NAME}", Body=b"")
    s3.put_object(Bucket=BUCKET, Key="runs/run-1/empty/", Body=b"")
    s3.put_object(Bucket=BUCKET, Key="runs/run-1/../escape.txt", Body=b"x")
    s3.put_object(Bucket=BUCKET, Key="runs/run-10/summary.json", Body=b"{}")  # a sibling with the same prefix
    local, fetched = fetch_run(f"s3://{BUCKET}/runs/run-1", reports_dir=tmp_path / "reports", s3=s3)
    assert local == tmp_path / "reports" / "run-1" and fetched.files == 3
    for name in ("summary.json", "locust_stats.csv", "sub/nested.txt"):
        assert (local / name).read_bytes() == (folder / name).read_bytes()
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == ["run-1"]  # no staging left, nothing escaped
    assert not (local / MARKER_NAME).exists() and not (tmp_path / "reports" / "escape.txt").exists()
    # fetching again refreshes the uploaded files and keeps what the report added
    (local / "report.html").write_text("<html>")
    (local / "summary.json").write_text("{}")
    fetch_run(f"s3://{BUCKET}/runs/run-1", reports_dir=tmp_path / "reports", s3=s3)
    assert (local / "report.html").exists()
    assert (local / "summary.json").read_bytes() == (folder / "summary.json").read_bytes()


@pytest.mark.e2e
def test_fetching_nothing_says_where_to_look(s3, tmp_path):
    with pytest.raises(UsageError,
                       match=rf"nothing found at s3://{BUCKET}/runs/nope/; .*aws s3 ls s3://{BUCKET}/runs/"):
        download_folder(S3Location(BUCKET, "runs/nope"), tmp_path, s3)
    with pytest.raises(UsageError, match="names a bucket, not a run"):
        fetch_run(f"s3://{BUCKET}", reports_dir=tmp_path, s3=s3)


@pytest.mark.e2e
def test_an_upload_that_fails_midway_is_a_run_error(s3, tmp_path):
    folder = run_folder(tmp_path / "run-1")
    with pytest.raises(RunError, match="bucket 'gone-bucket' does not exist"):
        upload_folder(folder, S3Location("gone-bucket", "runs/run-1"), s3)


# -- the commands, as processes against a moto server ----------------------------------------------

@pytest.fixture
def endpoint(module_endpoint):
    """The module's load target: the commands only send to it (its counts read as differences)."""
    return module_endpoint


def s3_run(endpoint, moto_server, out: Path, *extra: str, timeout: float = 90) -> subprocess.CompletedProcess:
    return run_cli("run", "--endpoint-name", "ep", "--endpoint-url", endpoint.url, "--payload", str(SAMPLE_PAYLOAD),
                   "-u", "2", "-r", "10", "--out", str(out), "-q", *extra, env=moto_server.env(), timeout=timeout)


@pytest.mark.e2e
def test_run_uploads_its_folder_and_report_reads_it_back(endpoint, moto_server, tmp_path):
    out = tmp_path / "run-ok"
    result = s3_run(endpoint, moto_server, out, "-t", "3s", "--upload", f"s3://{BUCKET}/runs")
    assert result.returncode == 0, result.stdout + result.stderr
    run_url = f"s3://{BUCKET}/runs/run-ok"
    assert f"the run folder goes to {run_url}/ when the run ends (write access checked)" in result.stdout
    assert f"to {run_url}/; read it back with `sm-locust report {run_url}`" in result.stdout
    uploaded = moto_server.keys(BUCKET, "runs/run-ok/")
    local = {f"runs/run-ok/{p.relative_to(out).as_posix()}": p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert uploaded == local and "runs/run-ok/summary.json" in uploaded
    assert not any(MARKER_NAME in key for key in moto_server.keys(BUCKET))

    fetched = tmp_path / "fetched"
    report = run_cli("report", f"s3://{BUCKET}/runs/run-ok", "--no-cloudwatch", "--out", str(fetched),
                     env=moto_server.env())
    assert report.returncode in (0, 1), report.stdout + report.stderr  # 1: a gap (no CloudWatch) is named, not fatal
    assert "Traceback" not in report.stderr
    assert f"downloaded {len(uploaded)} files" in report.stdout and f"to {fetched}/" in report.stdout
    assert (fetched / "report.html").exists() and (fetched / "steps.csv").exists()
    assert f"html: {fetched / 'report.html'}" in report.stdout
    totals = json.loads((out / "summary.json").read_text())["totals"]
    assert json.loads((fetched / "summary.json").read_text())["totals"] == totals


@pytest.mark.e2e
def test_a_malformed_upload_url_fails_in_one_line_before_anything_starts(endpoint, moto_server, tmp_path):
    out = tmp_path / "never"
    result = s3_run(endpoint, moto_server, out, "-t", "3s", "--upload", "https://bucket/prefix")
    assert_one_line_error(result, 2, "sm-locust: error: --upload 'https://bucket/prefix' is not an s3:// URL")
    assert not out.exists()


@pytest.mark.e2e
def test_a_bucket_that_is_not_there_fails_in_one_line_before_the_test(endpoint, moto_server, tmp_path):
    out = tmp_path / "never"
    before = endpoint.stats()["requests"]
    result = s3_run(endpoint, moto_server, out, "-t", "3s", "--upload", "s3://no-such-bucket-here/runs")
    assert_one_line_error(result, 2,
                          "cannot write to s3://no-such-bucket-here/runs/never: bucket "
                          "'no-such-bucket-here' does not exist")
    assert not out.exists() and endpoint.stats()["requests"] == before  # no traffic was sent


@pytest.mark.e2e
def test_a_failed_run_still_uploads_what_it_wrote(endpoint, moto_server, tmp_path):
    out = tmp_path / "run-failed"
    port = free_port()
    result = s3_run(endpoint, moto_server, out, "-t", "3s", "--upload", f"s3://{BUCKET}/runs", "--",
                    "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
                    "--expect-workers", "1", "--expect-workers-max-wait", "1")
    assert_one_line_error(result, 2, "only 0 of 1 workers connected")
    uploaded = moto_server.keys(BUCKET, "runs/run-failed/")
    assert {"runs/run-failed/options.json", "runs/run-failed/locust.log"} <= set(uploaded)
    assert b"only 0 of 1 workers connected" in uploaded["runs/run-failed/locust.log"]


@pytest.mark.e2e
def test_sigterm_stops_the_test_writes_the_results_and_uploads_them(endpoint, moto_server, tmp_path):
    """What `kubectl delete job` or activeDeadlineSeconds does to the master's PID 1."""
    out = tmp_path / "run-term"
    env = dict(os.environ, **moto_server.env())
    served_before = endpoint.stats()["requests"]
    proc = subprocess.Popen([sys.executable, "-m", "sm_locust", "run", "--endpoint-name", "ep", "--endpoint-url",
                             endpoint.url, "--payload", str(SAMPLE_PAYLOAD), "-u", "2", "-r", "10", "-t", "1h",
                             "--out", str(out), "-q", "--upload", f"s3://{BUCKET}/runs"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while endpoint.stats()["requests"] - served_before < 50:  # the test is running
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Traceback" not in stderr, stderr
    uploaded = moto_server.keys(BUCKET, "runs/run-term/")
    assert "runs/run-term/summary.json" in uploaded, (proc.returncode, stdout[-2000:], stderr)
    summary = json.loads(uploaded["runs/run-term/summary.json"])
    assert summary["totals"]["requests"] >= 50 and summary["duration_s"] < 3600  # stopped before -t
    assert "uploaded" in stdout
