"""`sm_locust.run` against the local endpoint, as a notebook would call it: the result object, the
same one-line errors as the CLI, a Predictor's endpoint / serializer / credentials, the stop button
(SIGINT to the calling process, as a kernel interrupt delivers it), and a calling process that gevent
never patched."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import boto3
import pytest

import sm_locust
from sm_locust.core.verdict import verdict_line
from sm_locust.errors import RunError, UsageError
from tests.conftest import SAMPLE_PAYLOAD, run_cli

ROOT = Path(__file__).resolve().parents[2]
SECRET = "predictor-secret-never-written"


@pytest.mark.e2e
def test_a_short_run_returns_its_result(endpoint, tmp_path, capsys):
    result = sm_locust.run("ep", endpoint_url=endpoint.url, payload=str(SAMPLE_PAYLOAD), users=2, spawn_rate=100,
                           run_time="3s", out=tmp_path / "run", progress="line")
    assert result.run_dir == tmp_path / "run" and result.interrupted is None
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert result.summary == summary and summary["totals"]["requests"] > 20
    assert result.verdict == verdict_line(summary)
    assert result.plateau is None  # constant users: no plateau search
    assert list(result.errors.columns) == ["error", "count"] and result.errors.empty
    timeline = result.timeline
    assert 2 <= len(timeline) <= 6 and timeline["requests"].sum() > 0
    assert {"time", "users", "rps", "goodput_rps", "p95_ms"} <= set(timeline.columns)
    assert str(timeline["time"].dtype) == "datetime64[ns, UTC]" and timeline["users"].max() == 2
    assert result.steps["users"].tolist() == [2]
    # progress: Locust's output went to the display, not the terminal (no tables, no log lines)
    err = capsys.readouterr().err
    assert "Aggregated" not in err and "locust.main" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("sm-locust: done in ") and last.endswith(f" s; results in {result.run_dir}/")
    options = json.loads((result.run_dir / "options.json").read_text())
    assert options["load"]["users"] == 2 and options["load"]["spawn_rate"] == 100.0
    assert options["load"]["progress_every_s"] == 1.0


@pytest.mark.e2e
@pytest.mark.parametrize("keywords, cli_argv", [
    ({"users": 0}, ["-u", "0"]),
    ({"shape": "plateau", "users": 4}, ["--shape", "plateau", "-u", "4"]),
    ({"shape": "plateaux"}, ["--shape", "plateaux"]),
])
def test_bad_options_raise_the_clis_one_line(keywords, cli_argv, endpoint, tmp_path):
    with pytest.raises(UsageError) as caught:
        sm_locust.run("ep", endpoint_url=endpoint.url, payload=str(SAMPLE_PAYLOAD), out=tmp_path / "run",
                      progress=False, **keywords)
    cli = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", endpoint.url, "--payload", str(SAMPLE_PAYLOAD),
                  "--out", str(tmp_path / "cli"), *cli_argv)
    assert cli.returncode == 2 and cli.stderr.strip() == f"sm-locust: error: {caught.value.message}"
    assert not (tmp_path / "run").exists() and not (tmp_path / "cli").exists()  # nothing started, nothing left


def test_an_endpoint_that_refuses_connections_is_the_clis_line(tmp_path):
    with pytest.raises(RunError, match=r"cannot connect to http://127.0.0.1:9: connection refused "
                                       r"\(waited 5 s for it to start\); is the endpoint "
                                       r"running\? \(check --endpoint-url\)"):
        sm_locust.run("ep", endpoint_url="http://127.0.0.1:9", data=b"{}", out=tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()  # the data= body's folder is removed with the failed start


@pytest.mark.e2e
def test_every_request_failing_raises_and_keeps_the_folder(endpoint_factory, tmp_path):
    ep = endpoint_factory(model_error_ratio=1.0)
    with pytest.raises(RunError, match=r"^every request failed: ModelError x\d+.*; what was measured is in .*/run/$"):
        sm_locust.run("ep", endpoint_url=ep.url, payload=str(SAMPLE_PAYLOAD), users=1, run_time="2s",
                      out=tmp_path / "run", progress=False)
    errors = sm_locust.load(tmp_path / "run").errors
    assert errors["error"].tolist() == ["ModelError"] and errors["count"].iloc[0] > 0


class CSVSerializer:
    CONTENT_TYPE = "text/csv"

    def serialize(self, data):
        return ",".join(str(v) for v in data)


CAPTURE = textwrap.dedent("""
    import json, sys
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with open(sys.argv[1], "a") as f:
                f.write(json.dumps({"path": self.path, "headers": dict(self.headers), "body": body.decode()}) + "\\n")
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()
""")


@pytest.fixture
def capture(tmp_path):
    """A server on 127.0.0.1 that records every request's path, headers and body (what Locust sent)."""
    log = tmp_path / "requests.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", CAPTURE, str(log)], stdout=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline())
    yield SimpleNamespace(url=f"http://127.0.0.1:{port}", requests=lambda: [json.loads(line) for line in
                                                                            log.read_text().splitlines()])
    proc.terminate()
    proc.wait(10)


@pytest.mark.e2e
def test_a_predictor_gives_endpoint_body_types_and_credentials(capture, tmp_path, monkeypatch, capsys):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name)  # only the predictor's session has credentials and a region
    session = boto3.Session(aws_access_key_id="AKIDPREDICTOR", aws_secret_access_key=SECRET, region_name="eu-west-1")
    predictor = SimpleNamespace(endpoint_name="ranker", serializer=CSVSerializer(), component_name="ic-a",
                                deserializer=SimpleNamespace(ACCEPT=("application/json",)),
                                sagemaker_session=SimpleNamespace(boto_session=session, boto_region_name="eu-west-1"))
    result = sm_locust.run(predictor=predictor, data=[1, 2.5, 3], endpoint_url=capture.url, users=1, run_time="2s",
                           out=tmp_path / "run")
    sent = capture.requests()
    totals = result.summary["totals"]
    # every request the server saw was counted: completed, or cut short by the stop (the server logs on receipt)
    assert 0 < totals["requests"] <= len(sent) <= totals["requests"] + totals["in_flight_at_stop"], totals
    first = sent[0]
    assert first["path"] == "/endpoints/ranker/invocations" and first["body"] == "1,2.5,3"
    headers = {k.lower(): v for k, v in first["headers"].items()}
    assert headers["content-type"] == "text/csv" and headers["accept"] == "application/json"
    assert headers["x-amzn-sagemaker-inference-component"] == "ic-a"
    assert "Credential=AKIDPREDICTOR/" in headers["authorization"]
    assert "/eu-west-1/sagemaker/aws4_request" in headers["authorization"]
    assert (result.run_dir / "payload.body").read_bytes() == b"1,2.5,3"
    options = json.loads((result.run_dir / "options.json").read_text())
    assert options["sm_locust"]["region"] == "eu-west-1" and options["sm_locust"]["content_type"] == "text/csv"
    for path in result.run_dir.rglob("*"):  # the secret is nowhere: not in a file, not on the screen
        assert not path.is_file() or SECRET.encode() not in path.read_bytes(), path
    out, err = capsys.readouterr()
    assert SECRET not in out + err


def test_a_predictor_for_another_endpoint_is_refused(tmp_path):
    predictor = SimpleNamespace(endpoint_name="ranker")
    with pytest.raises(UsageError, match="endpoint_name='other' differs from the predictor's endpoint 'ranker'"):
        sm_locust.run("other", predictor=predictor, data=b"x", out=tmp_path / "run")
    with pytest.raises(UsageError, match=r"pass data= \(one request body\) or payload= \(a payload source\), not both"):
        sm_locust.run("ep", data=b"x", payload=str(SAMPLE_PAYLOAD), out=tmp_path / "run")


SCRIPT = textwrap.dedent("""
    import json, sys, time
    import sm_locust
    url, out, run_time = sys.argv[1:4]
    t0 = time.monotonic()
    result = sm_locust.run("ep", endpoint_url=url, payload=sys.argv[4], users=2, run_time=run_time, out=out,
                           progress="line")
    import gevent.monkey
    print(json.dumps({"interrupted": result.interrupted, "requests": result.summary["totals"]["requests"],
                      "duration_s": result.summary["duration_s"], "wall_s": time.monotonic() - t0,
                      "socket_patched": gevent.monkey.is_module_patched("socket"),
                      "locust_imported": "locust" in sys.modules}))
""")


def python_calling_run(url: str, out: Path, run_time: str) -> subprocess.Popen:
    """A fresh interpreter that imports sm_locust and calls run(), in its own process group as Jupyter
    starts a kernel (its interrupt is SIGINT to that group)."""
    return subprocess.Popen([sys.executable, "-c", SCRIPT, url, str(out), run_time, str(SAMPLE_PAYLOAD)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            cwd=ROOT)


@pytest.mark.e2e
def test_the_calling_process_is_never_patched_by_gevent(endpoint, tmp_path):
    proc = python_calling_run(endpoint.url, tmp_path / "run", "2s")
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    report = json.loads(out.splitlines()[-1])
    assert report["requests"] > 0 and report["interrupted"] is None
    assert report["socket_patched"] is False and report["locust_imported"] is False


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_the_stop_button_stops_the_run_and_returns_what_was_measured(endpoint, tmp_path):
    out = tmp_path / "run"
    proc = python_calling_run(endpoint.url, out, "1h")  # what stops it is the interrupt
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (out / "timeline.jsonl").is_file():
        time.sleep(0.2)
    time.sleep(3)  # the users have been sending for a few seconds
    os.killpg(proc.pid, signal.SIGINT)  # what jupyter_client's interrupt_kernel does to the kernel's group
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    report = json.loads(stdout.splitlines()[-1])
    assert report["interrupted"].startswith("interrupted by SIGINT: Locust stopped; what it measured is in")
    # it stopped on the interrupt, not at its -t of 1 h: the run's own duration fits inside the caller's wall time
    assert report["requests"] > 0 and 0 < report["duration_s"] <= report["wall_s"]
    assert stderr.strip().splitlines()[-1].startswith("sm-locust: stopped after ")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True and summary["totals"]["requests"] == report["requests"]
    assert report["socket_patched"] is False


def test_a_data_body_never_lands_in_a_folder_that_holds_a_run(tmp_path):
    earlier = tmp_path / "run"
    earlier.mkdir()
    (earlier / "summary.json").write_text('{"totals": {"requests": 1}}')
    with pytest.raises(UsageError, match=r"--out .*run already holds a run .*pass --overwrite"):
        sm_locust.run("ep", endpoint_url="http://127.0.0.1:9", data=b"{}", out=earlier, progress=False)
    assert sorted(p.name for p in earlier.iterdir()) == ["summary.json"]
    with pytest.raises(UsageError, match=r"progress='bar'"):  # refused before the body is written anywhere
        sm_locust.run("ep", endpoint_url="http://127.0.0.1:9", data=b"{}", out=tmp_path / "new", progress="bar")
    assert not (tmp_path / "new").exists()
