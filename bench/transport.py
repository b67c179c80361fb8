"""Transport bench: what one Locust process can send, per client, against the same fast server.

    python bench/transport.py                 # full: 10 s per client, 32 users
    python bench/transport.py --quick         # CI smoke: ~1 s per client, figures only
    python bench/transport.py --endpoint      # also: how far the local endpoint (gunicorn) goes

Each client runs in its own Locust process (an in-process Environment and local runner, users
without wait time) pinned to CPU 0; the server runs pinned to CPU 1 (`taskset`, else
`os.sched_setaffinity`), so the client's core is the limit, not the server's. The server is a
minimal gevent StreamServer answering every request with one fixed keep-alive HTTP response (no
WSGI, no pywsgi: pywsgi adds ~40 ms on reused connections, see docs/transport.md); its CPU share
is printed so you can see it is not the bottleneck. Clients, all sending the same 1 KB POST:

| name | what |
|---|---|
| raw | a Locust User over a bare geventhttpclient `HTTPClient`, unsigned, one event per call (the floor) |
| fasthttp | Locust's `FastHttpUser`, unsigned |
| boto3 | `SageMakerUser`, `transport = "boto3"` (botocore `invoke_endpoint`, retries off) |
| fast | `SageMakerUser`, `transport = "fast"`: what the default locustfile runs (`FastSageMakerClient`) |

Printed per client: requests/s, client CPU µs per request (process CPU time / requests over the
measured window, after a warm-up), the client's and the server's CPU use, and req/s relative to
`raw`. Target: signed `fast` >= 0.8 x `raw`. Only 127.0.0.1 is used; the AWS credentials are
placeholders set for the child processes (the server checks no signature).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLIENTS = ("raw", "fasthttp", "boto3", "fast")
ENDPOINT = "bench"
PATH = f"/endpoints/{ENDPOINT}/invocations"
BODY = (b'{"inputs": {"feat_ids": [[' + b", ".join(b"%d" % (i * 7919 % 100000) for i in range(39)) + b"]], "
        b'"feat_vals": [[' + b", ".join(b"0.%04d" % (i * 37 % 10000) for i in range(39)) + b"]]}}")
BODY = BODY + b" " * max(0, 1024 - len(BODY))  # 1 KB, still valid JSON
ANSWER = b'{"predictions": [0.7345]}'
RESPONSE = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
            b"x-Amzn-Invoked-Production-Variant: AllTraffic\r\nx-amzn-RequestId: 00000000-0000-0000-0000-000000000000"
            b"\r\n\r\n" % len(ANSWER)) + ANSWER
FAKE_AWS = {"AWS_ACCESS_KEY_ID": "bench-not-a-key", "AWS_SECRET_ACCESS_KEY": "bench-not-a-secret",
            "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}


# ---------------------------------------------------------------------------------- the server


def serve(port: int) -> None:
    """Answer every HTTP/1.1 request on 127.0.0.1:port with RESPONSE, keeping connections open."""
    from gevent.server import StreamServer

    def handle(sock, _address) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buffer = b""
        while True:
            data = sock.recv(262144)
            if not data:
                return
            buffer += data
            while True:
                end = buffer.find(b"\r\n\r\n")
                if end < 0:
                    break
                at = buffer.find(b"ontent-Length:", 0, end)
                if at < 0:
                    at = buffer.find(b"ontent-length:", 0, end)
                size = int(buffer[at + 14:buffer.find(b"\r\n", at, end + 2)]) if at >= 0 else 0
                if len(buffer) < end + 4 + size:
                    break
                buffer = buffer[end + 4 + size:]
                sock.sendall(RESPONSE)

    server = StreamServer(("127.0.0.1", port), handle, backlog=1024)
    print("ready", flush=True)
    server.serve_forever()


# ---------------------------------------------------------------------------------- the clients


def user_class(kind: str, url: str):
    from locust import User, task
    from locust.contrib.fasthttp import FastHttpUser

    from sm_locust.invocation import Invocation
    from sm_locust.users import SageMakerUser

    invocation = Invocation(body=BODY, content_type="application/json")
    if kind == "raw":
        from geventhttpclient import HTTPClient
        from geventhttpclient.url import URL

        class Raw(User):
            http = None

            def on_start(self):
                if Raw.http is None:
                    Raw.http = HTTPClient.from_url(URL(url), concurrency=1024, connection_timeout=60, network_timeout=60)
                self.fire = self.environment.events.request.fire

            @task
            def post(self):
                t0 = time.perf_counter()
                response = Raw.http.request("POST", PATH, body=BODY, headers={"Content-Type": "application/json"})
                body = response.read()
                self.fire(request_type="POST", name=PATH, response_time=(time.perf_counter() - t0) * 1000,
                          response_length=len(body), exception=None if response.status_code == 200 else
                          RuntimeError(response.status_code), context={})

        return Raw
    if kind == "fasthttp":
        class Fast(FastHttpUser):
            host = url
            concurrency = 1

            @task
            def post(self):
                self.client.post(PATH, data=BODY, headers={"Content-Type": "application/json"})

        return Fast
    if kind in ("boto3", "fast"):
        class Signed(SageMakerUser):
            endpoint_name = ENDPOINT
            endpoint_url = url
            transport = kind

            @task
            def post(self):
                self.client.invoke(invocation)

        return Signed
    raise SystemExit(f"unknown client {kind!r}; choose one of: {', '.join(CLIENTS)}")


def run_client(kind: str, url: str, users: int, seconds: float, warmup: float) -> dict:
    """One Locust process: `users` users of `kind` against url; figures over the measured window."""
    import locust  # noqa: F401  (gevent patching before botocore)
    import gevent
    from locust.env import Environment

    env = Environment(user_classes=[user_class(kind, url)])
    runner = env.create_local_runner()
    runner.start(users, spawn_rate=max(users * 20, 100))
    gevent.sleep(warmup)
    n0, f0, c0, t0 = env.stats.total.num_requests, env.stats.total.num_failures, time.process_time(), time.perf_counter()
    gevent.sleep(seconds)
    n1, f1, c1, t1 = env.stats.total.num_requests, env.stats.total.num_failures, time.process_time(), time.perf_counter()
    runner.quit()
    requests = n1 - n0
    errors = {str(e.error): e.occurrences for e in env.stats.errors.values()}
    return {"client": kind, "requests": requests, "failures": f1 - f0, "seconds": t1 - t0,
            "rps": requests / (t1 - t0), "cpu_us_per_request": (c1 - c0) / max(requests, 1) * 1e6,
            "client_cpu_pct": (c1 - c0) / (t1 - t0) * 100, "errors": dict(list(errors.items())[:3])}


# ---------------------------------------------------------------------------------- the driver


def pinned(command: list[str], cpu: int | None) -> list[str]:
    if cpu is None:
        return command
    if shutil.which("taskset"):
        return ["taskset", "-c", str(cpu), *command]
    return [*command, "--cpu", str(cpu)]  # the child pins itself with os.sched_setaffinity


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"the bench server on port {port} did not start")


def measure(kind: str, url: str, server_pid: int, args, client_cpu: int | None) -> dict:
    command = [sys.executable, __file__, "--client", kind, "--url", url, "--users", str(args.users),
               "--seconds", str(args.seconds), "--warmup", str(args.warmup)]
    env = {**os.environ, **FAKE_AWS}
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", "AWS_SESSION_TOKEN"):
        env.pop(name, None)
    s0, w0 = cpu_seconds(server_pid), time.perf_counter()
    done = subprocess.run(pinned(command, client_cpu), capture_output=True, text=True, env=env,
                          timeout=args.seconds + args.warmup + 120)
    s1, w1 = cpu_seconds(server_pid), time.perf_counter()
    if done.returncode != 0:
        raise SystemExit(f"client {kind} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["server_cpu_pct"] = (s1 - s0) / (w1 - w0) * 100  # over the child's life, warm-up and start included
    return result


def table(results: list[dict], note: str) -> str:
    raw = next((r["rps"] for r in results if r["client"] == "raw"), None)
    lines = ["| client | req/s | client CPU µs/req | client CPU % | server CPU % | req/s vs raw | failures |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        ratio = f"{r['rps'] / raw:.2f}" if raw else "-"
        lines.append(f"| {r['client']}{r.get('label', '')} | {r['rps']:,.0f} | {r['cpu_us_per_request']:,.0f} | "
                     f"{r['client_cpu_pct']:.0f} | {r['server_cpu_pct']:.0f} | {ratio} | {r['failures']} |")
    return "\n".join(lines) + f"\n\n{note}"


def start_server(command: list[str], port: int, cpu: int | None, log) -> subprocess.Popen:
    process = subprocess.Popen(pinned(command, cpu), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for_port(port)
    except SystemExit:
        process.kill()
        raise
    return process


def stop(process: subprocess.Popen) -> None:
    import signal

    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def drive(args) -> int:
    cpus = os.cpu_count() or 1
    server_cpu, client_cpu = (1, 0) if cpus >= 2 else (None, None)
    clients = args.clients.split(",") if args.clients else list(CLIENTS)
    load = os.getloadavg()
    how = "taskset" if shutil.which("taskset") else "sched_setaffinity"
    print(f"# transport bench: {args.seconds:g} s per client after {args.warmup:g} s warm-up, {args.users} users, "
          f"1 KB POST; client on CPU {client_cpu}, server on CPU {server_cpu} ({how}); "
          f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    port = free_port()
    results = []
    with open(os.devnull, "wb") as log:
        server = start_server([sys.executable, __file__, "--serve", "--port", str(port)], port, server_cpu, log)
        try:
            for kind in clients:
                result = measure(kind, f"http://127.0.0.1:{port}", server.pid, args, client_cpu)
                results.append(result)
                print(f"  {kind}: {result['rps']:,.0f} req/s, {result['cpu_us_per_request']:,.0f} µs CPU/request"
                      + (f", errors {result['errors']}" if result["errors"] else ""), flush=True)
        finally:
            stop(server)
        if args.endpoint:  # the local endpoint's own ceiling, same raw client
            sys.path.insert(0, str(ROOT))
            from sm_locust.endpoint.server import free_port as endpoint_port

            eport = endpoint_port()
            command = [sys.executable, "-m", "sm_locust", "serve", "--port", str(eport)]
            endpoint = start_server(command, eport, server_cpu, log)
            try:
                for kind in ("raw", "fast"):
                    result = measure(kind, f"http://127.0.0.1:{eport}", endpoint_pid(endpoint), args, client_cpu)
                    result["label"] = " → local endpoint"
                    results.append(result)
                    print(f"  {kind} -> local endpoint: {result['rps']:,.0f} req/s", flush=True)
            finally:
                stop(endpoint)
    load = os.getloadavg()
    print()
    print(table(results, f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"))
    raw = [r["rps"] for r in results if r["client"] == "raw" and not r.get("label")]
    fast = [r["rps"] for r in results if r["client"] == "fast" and not r.get("label")]
    if raw and fast:  # means, when a client was measured more than once (--clients raw,fast,raw,fast)
        ratio = (sum(fast) / len(fast)) / (sum(raw) / len(raw))
        print(f"\nsigned fast / raw unsigned = {ratio:.2f} (target >= 0.80)")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


def endpoint_pid(process: subprocess.Popen) -> int:
    """The gunicorn worker's pid (the one doing the work), else the master's (taskset execs, same pid)."""
    try:
        children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
    except OSError:
        children = []
    return int(children[0]) if children else process.pid


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="CI smoke: 1 s per client, 8 users (figures printed, no asserts)")
    p.add_argument("--seconds", type=float, default=10.0, help="measured seconds per client (default 10)")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds before measuring (default 2)")
    p.add_argument("--users", type=int, default=32, help="Locust users per client process (default 32)")
    p.add_argument("--clients", default="", help=f"comma-separated subset of {','.join(CLIENTS)}")
    p.add_argument("--endpoint", action="store_true", help="also measure the local endpoint (gunicorn+gevent)")
    p.add_argument("--json", default="", help="also write the figures to this JSON file")
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--client", default="", help=argparse.SUPPRESS)
    p.add_argument("--url", default="", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--cpu", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    if args.serve:
        serve(args.port)
        return 0
    if args.client:
        print(json.dumps(run_client(args.client, args.url, args.users, args.seconds, args.warmup)))
        return 0
    if args.quick:
        args.seconds, args.warmup, args.users = min(args.seconds, 1.0), min(args.warmup, 0.5), min(args.users, 8)
    return drive(args)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
