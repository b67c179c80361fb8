"""Test doubles shared by test modules (no test module imports another).

- `FakeRuntime`: a SageMaker Runtime stand-in on 127.0.0.1, a gevent WSGI server on a free port.
  Every request's SigV4 signature is recomputed independently with botocore's `SigV4Auth` from
  what was received (raw path, signed headers, body); a mismatch answers 403
  `InvalidSignatureException`, like AWS. Behaviour is chosen per endpoint name via
  `server.routes[name] = handler(environ, body) -> (status, headers, body)`; `body` may be an
  iterable (streamed with chunked encoding). Handlers: `echo`, `json_error`.
- `ACCESS_KEY`, `SECRET_KEY`, `TOKEN`, `REGION`: the placeholder credentials it accepts;
  `botocore_client(url)`: a botocore `sagemaker-runtime` client using them, retries off;
  `signed_client(transport, environment, url)`: an sm-locust client of either transport using them;
  `recorded(environment)`: the request events a test's clients fire, as keyword dicts.
- `TargetRecorder`: a fast keep-alive HTTP stand-in (`sm_locust.testing.fakehttp.KeepAliveServer`:
  pywsgi adds ~40 ms per reused connection) recording the TargetModel / InferenceComponentName of every request in
  order (`targets`, and per keep-alive connection in `by_connection`), answering like a tiny
  multi-model endpoint: the emulation's model-wait header on a model's first request, nothing
  after; names in `unknown` get SageMaker's ValidationError. No signature check.
- `wait_exit(proc, timeout)`: poll a child process for its exit code; `stop_processes(procs)`: SIGINT,
  wait, then kill the session of whatever is left.
- `BareWorker`, `BareMaster`: Locust runners of a kind and nothing else (no sockets, no greenlets), for
  code that asks only which runner it is on; a `BareMaster` has `clients` named as given.
- `MotoServer`: `moto_server` as a process on a free 127.0.0.1 port (S3 and other AWS stand-ins).
- `moto_sagemaker(moto_url, runtime_url, monkeypatch)`: SageMaker and CloudWatch -> that moto server
  (reset), the runtime -> a local endpoint, and the model `my-model` (role `ROLE`) the sweeps clone;
  `leftovers(client)`: the endpoints, endpoint configs and cloned models still there (`NOTHING`).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from urllib.parse import unquote

import locust  # noqa: F401  (gevent monkey-patching before botocore)
from gevent.pywsgi import WSGIHandler, WSGIServer
from locust.runners import MasterRunner, WorkerRunner

import boto3
import botocore.session
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

from sm_locust.invocation import MODEL_WAIT_HEADER
from sm_locust.testing.fakehttp import KeepAliveServer
from sm_locust.transport import create_client
from sm_locust.transport.contract import SageMakerClient
from sm_locust.util.ports import free_port

ACCESS_KEY = "AKIDTESTONLY0000"
SECRET_KEY = "test/secret+key=not-real"
TOKEN = "test-session-token/with+chars=="
REGION = "us-west-2"


class _RawHandler(WSGIHandler):
    def get_environ(self):
        env = super().get_environ()
        env["RAW_URI"] = self.path  # the path as sent, before unquoting
        return env


def verify_sigv4(environ: dict, body: bytes, secrets: dict[str, str]) -> str | None:
    """None if the request's signature is valid, else why not (recomputed with botocore)."""
    auth = environ.get("HTTP_AUTHORIZATION", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return "no SigV4 Authorization header"
    fields = dict(part.strip().split("=", 1) for part in auth[len("AWS4-HMAC-SHA256 ") :].split(","))
    access, day, region, service, terminator = fields["Credential"].split("/")
    if access not in secrets or service != "sagemaker" or terminator != "aws4_request":
        return f"bad credential scope {fields['Credential']}"
    signed = fields["SignedHeaders"].split(";")
    if "host" not in signed or "x-amz-date" not in signed:
        return "host and x-amz-date must be signed"
    token = environ.get("HTTP_X_AMZ_SECURITY_TOKEN")
    if token is not None and "x-amz-security-token" not in signed:
        return "session token sent unsigned"
    headers = {}
    for name in signed:
        key = "CONTENT_TYPE" if name == "content-type" else "HTTP_" + name.upper().replace("-", "_")
        if name == "content-length":
            key = "CONTENT_LENGTH"
        if key not in environ:
            return f"signed header {name} missing"
        headers[name] = environ[key]
    amz_date = headers["x-amz-date"]
    if amz_date[:8] != day:
        return "date of scope and x-amz-date differ"
    url = f"http://{headers['host']}{environ['RAW_URI']}"
    request = AWSRequest(method=environ["REQUEST_METHOD"], url=url, headers=headers, data=body)
    request.context["timestamp"] = amz_date
    signer = SigV4Auth(Credentials(access, secrets[access], token), service, region)
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    if expected != fields["Signature"]:
        return "signature mismatch"
    return None


def json_error(status: int, code: str, message: str, **extra) -> tuple:
    body = json.dumps({"message": message, **extra}).encode()
    return status, [("x-amzn-ErrorType", f"{code}:http://internal.amazon.com/coral/"),
                    ("Content-Type", "application/json")], body


def echo(environ, body):
    return 200, [("Content-Type", environ.get("CONTENT_TYPE") or "application/json")], body


class FakeRuntime:
    """SageMaker Runtime stand-in; counts requests per path in `hits`."""

    def __init__(self, secrets: dict[str, str] | None = None):
        self.secrets = secrets or {ACCESS_KEY: SECRET_KEY}
        self.routes: dict[str, object] = {}
        self.hits: Counter = Counter()
        self.seen: list[dict] = []
        self.server = WSGIServer(("127.0.0.1", 0), self.app, handler_class=_RawHandler, log=None)

    def __enter__(self):
        self.server.start()
        return self

    def __exit__(self, *exc):
        self.server.stop(timeout=1)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def app(self, environ, start_response):
        body = environ["wsgi.input"].read()
        path = environ["RAW_URI"]
        self.hits[path] += 1
        self.seen.append({k: v for k, v in environ.items() if k.startswith(("HTTP_", "CONTENT_"))} | {"RAW_URI": path})
        problem = verify_sigv4(environ, body, self.secrets)
        if problem:
            status, headers, out = json_error(403, "InvalidSignatureException", problem)
        else:
            parts = path.split("/")  # '', 'endpoints', name, operation
            if len(parts) != 4 or parts[1] != "endpoints":
                status, headers, out = json_error(404, "UnknownOperationException", path)
            else:
                handler = self.routes.get(unquote(parts[2]), echo)
                status, headers, out = handler(environ, body)
        reason = {200: "OK", 202: "Accepted"}.get(status, "Error")
        start_response(f"{status} {reason}", list(headers))
        return [out] if isinstance(out, bytes) else out


class TargetRecorder:
    """See the module docstring; `with TargetRecorder() as fake: ... fake.url, fake.targets`."""

    def __init__(self, unknown: Iterable[str] = (), cache_answers: bool = True):
        self.targets: list[str | None] = []
        self.by_connection: dict[object, list[str | None]] = {}  # each keep-alive connection's targets, in order
        self.unknown = set(unknown)
        self.cache_answers = cache_answers
        self.loaded: set[str] = set()
        self.server = KeepAliveServer(self._answer)

    def __enter__(self):
        self.server.__enter__()
        return self

    def __exit__(self, *exc):
        self.server.__exit__(*exc)

    @property
    def url(self) -> str:
        return self.server.url

    def _answer(self, head: bytes, address: object) -> bytes:
        headers = {}
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        target = headers.get("x-amzn-sagemaker-target-model") or headers.get("x-amzn-sagemaker-inference-component")
        self.targets.append(target)
        self.by_connection.setdefault(address, []).append(target)
        if target in self.unknown:
            body = json.dumps({"message": f"Inference Component Name {target} not found."}).encode()
            extra = "x-amzn-ErrorType: ValidationError:http://internal.amazon.com/coral/com.amazon.coral.validate/\r\n"
            status = "400 Bad Request"
        else:
            body, status, extra = b'{"predictions": [0.5]}', "200 OK", ""
            if target and self.cache_answers and target not in self.loaded:
                self.loaded.add(target)
                extra = f"{MODEL_WAIT_HEADER}: 12.5\r\n"  # as the emulation marks a request that waited
        return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{extra}"
                f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def botocore_client(url: str, token: str | None = TOKEN, **config):
    session = botocore.session.Session()
    return session.create_client(
        "sagemaker-runtime",
        region_name=REGION,
        endpoint_url=url,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        aws_session_token=token,
        config=Config(retries={"total_max_attempts": 1}, **config),
    )


def signed_client(transport: str, environment, url: str, endpoint: str = "ep", **settings) -> SageMakerClient:
    """A client of `transport` for `url`, signing with the placeholder credentials the fake accepts."""
    return create_client(transport, environment, endpoint, region=REGION, endpoint_url=url,
                         credentials=Credentials(ACCESS_KEY, SECRET_KEY, TOKEN), **settings)


def recorded(environment) -> list[dict]:
    """The Locust request events fired on `environment` from now on, each as its keyword arguments."""
    seen: list[dict] = []
    environment.events.request.add_listener(lambda **kw: seen.append(kw))
    return seen


def wait_exit(proc: subprocess.Popen, timeout: float) -> int:
    """Poll for the exit code (gevent's patched Popen.wait can miss a child's exit under pytest)."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        if time.monotonic() > deadline:
            raise AssertionError(f"{proc.args[:4]} still running after {timeout} s")
        time.sleep(0.1)
    return proc.returncode


def stop_processes(processes: Iterable[subprocess.Popen]) -> None:
    """SIGINT every process still running, then wait up to 10 s each; a process that does not exit is
    killed with its session (they are started with start_new_session)."""
    processes = list(processes)
    for proc in processes:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    for proc in processes:
        try:
            wait_exit(proc, 10)
        except AssertionError:
            os.killpg(proc.pid, signal.SIGKILL)
            wait_exit(proc, 10)


class MotoServer:
    """`moto_server` as a process on a free 127.0.0.1 port (the S3 stand-in for process tests)."""

    def __init__(self, log_path: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = open(log_path, "wb")
        self.process = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p",
                                         str(self.port)],
                                        stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                alive = self.process.poll() is None and time.monotonic() < deadline
                assert alive, f"moto_server did not start: {log_path}"
                time.sleep(0.1)

    def client(self):
        return boto3.client("s3", endpoint_url=self.url, region_name="us-east-1",
                            aws_access_key_id="testing", aws_secret_access_key="testing")

    def env(self) -> dict[str, str]:
        """What a process needs to use this server as S3 (fake keys, as the conftest sandbox sets)."""
        return {"AWS_ENDPOINT_URL_S3": self.url, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": "us-east-1"}

    def keys(self, bucket: str, prefix: str = "") -> dict[str, bytes]:
        s3 = self.client()
        found = {}
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                found[item["Key"]] = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
        return found

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._log.close()


ROLE = "arn:aws:iam::123456789012:role/sagemaker"
NOTHING = {"endpoints": [], "configs": [], "models": []}


def moto_sagemaker(moto_url: str, runtime_url: str, monkeypatch, environment: dict[str, str] | None = None):
    """Control plane and CloudWatch -> the moto server (reset first), runtime -> `runtime_url`; creates
    `my-model` (with `environment` as its container's Environment when given); returns a sagemaker client."""
    urllib.request.urlopen(urllib.request.Request(f"{moto_url}/moto-api/reset", method="POST"), timeout=10).close()
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER", moto_url)
    monkeypatch.setenv("AWS_ENDPOINT_URL_CLOUDWATCH", moto_url)
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", runtime_url)
    client = boto3.client("sagemaker", region_name="us-east-1")
    container = {"Image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/ranker:1",
                 "ModelDataUrl": "s3://bucket/model.tar.gz"}
    if environment is not None:
        container["Environment"] = environment
    client.create_model(ModelName="my-model", ExecutionRoleArn=ROLE, PrimaryContainer=container)
    return client


def leftovers(client) -> dict[str, list[str]]:
    """What a sweep left on the moto server: endpoints, endpoint configs, models other than `my-model`."""
    return {"endpoints": [e["EndpointName"] for e in client.list_endpoints()["Endpoints"]],
            "configs": [c["EndpointConfigName"] for c in client.list_endpoint_configs()["EndpointConfigs"]],
            "models": [m["ModelName"] for m in client.list_models()["Models"] if m["ModelName"] != "my-model"]}


class ManualClock:
    """A clock tests move by hand: `clock.now += 2.5`; call it like time.monotonic."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def write_run_folder(folder, summary: dict, rows: list[dict]):
    """A run folder with `summary` as summary.json and `rows` as locust_stats.csv (for readers and gates)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary.json").write_text(json.dumps(summary))
    if rows:
        header = list(rows[0])
        lines = [",".join(header)] + [",".join(f'"{r.get(h, "")}"' for h in header) for r in rows]
        (folder / "locust_stats.csv").write_text("\n".join(lines) + "\n")
    return folder


def moto_with_input(log_dir: Path, bucket: str, body: bytes, key: str = "in/request.json") -> Iterator[MotoServer]:
    """A module fixture's body: a moto server holding `bucket` with one input object at `key`, stopped after."""
    server = MotoServer(log_dir / "moto_server.log")
    server.client().create_bucket(Bucket=bucket)
    server.client().put_object(Bucket=bucket, Key=key, Body=body)
    yield server
    server.stop()



class BareWorker(WorkerRunner):
    """A worker runner by kind only (module doc)."""

    def __init__(self) -> None:
        pass

    def __del__(self) -> None:
        pass


class SocketlessMaster(MasterRunner):
    """A running master's state (4 users, no workers) on an environment, without its sockets."""

    user_count = 4
    state = "running"
    greenlet = None
    clients: dict = {}

    def __init__(self, environment) -> None:
        self.environment = environment


class BareMaster(MasterRunner):
    """A master runner by kind only, with `clients` named as given (module doc)."""

    def __init__(self, clients: Iterable[str] = ()) -> None:
        self.clients = {c: object() for c in clients}

    def __del__(self) -> None:
        pass
