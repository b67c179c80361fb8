"""Transport bench: what one Locust process can send, per client, against the same fixed-answer server.

    python bench/transport.py                   # 3 rounds, 10 s per client and body mode, 32 users
    python bench/transport.py --server nginx    # nginx answers instead of the bench's gevent server
    python bench/transport.py --clients raw,fast --rounds 6 --paired   # the pair only, side by side
    python bench/transport.py --quick           # CI smoke: 1 round, ~1 s per measurement, figures only
    python bench/transport.py --endpoint        # also: how far the local endpoint (gunicorn) goes

Each client runs in its own Locust process (an in-process Environment and local runner, users
without wait time) pinned to CPU 0; the server runs pinned to CPU 1 (`taskset`, else
`os.sched_setaffinity`), so the client's core is the limit, not the server's. Servers, both
answering every request with one fixed keep-alive HTTP response:

- `gevent` (default): a minimal gevent StreamServer written here (no WSGI, no pywsgi: pywsgi adds
  ~40 ms on reused connections, see docs/transport.md);
- `nginx`: `nginx` from the PATH, one worker pinned to CPU 1, `return 200` with the same answer
  (the setup of the independent measurement in issue 11).

Clients, all sending a 1 KB JSON POST:

| name | what |
|---|---|
| raw | a Locust User over a bare geventhttpclient `HTTPClient`, unsigned, one event per call (the floor) |
| fasthttp | Locust's `FastHttpUser`, unsigned |
| boto3 | `SageMakerUser`, `transport = "boto3"` (botocore `invoke_endpoint`, retries off) |
| fast | `SageMakerUser` with its default transport (`fast`): what `sm-locust run` sends with |

Body modes, both measured in each client process, one after the other: `fresh` (a new body object
with new content on every call: `self.invoke(body)` for the SageMaker users, so a new Invocation
too) and `repeated` (one prepared body / Invocation sent again and again, as a payload pool does).

Rounds interleave the clients (raw, then the others; the order reverses every other round) so that
each ratio compares figures measured minutes apart at most; the machine may be shared. With
`--paired` a round's clients run at the same time, all pinned to the client core: each gets a
share of it under the same background load, which keeps the req/s ratio meaningful on a busy
machine (it is then a ratio of throughput per CPU share, not of what one core gives). Printed per
round and mode: `fast` req/s as a share of `raw` req/s in the same round, and the same share from
client CPU per call (raw µs / fast µs), the steadier figure when other work shares the cores. Then
a table of every measurement and the median of each ratio over the rounds. Target: `fast` >= 0.8x
`raw` with fresh bodies, >= 0.9x with a repeated body. Only 127.0.0.1 is used; the AWS credentials
are placeholders set for the child processes (the servers check no signature).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLIENTS = ("raw", "fasthttp", "boto3", "fast")
MODES = ("fresh", "repeated")
SERVERS = ("gevent", "nginx")
ENDPOINT = "bench"
PATH = f"/endpoints/{ENDPOINT}/invocations"
_HEAD = b'{"id": "'  # a fresh body puts a 10-digit counter here, so it stays valid JSON of the same size
_TAIL = (b'", "inputs": {"feat_ids": [[' + b", ".join(b"%d" % (i * 7919 % 100000) for i in range(39)) + b"]], "
         b'"feat_vals": [[' + b", ".join(b"0.%04d" % (i * 37 % 10000) for i in range(39)) + b"]]}}")
_TAIL = _TAIL + b" " * max(0, 1024 - len(_HEAD) - 10 - len(_TAIL))  # 1 KB, still valid JSON
BODY = _HEAD + b"0" * 10 + _TAIL
ANSWER = b'{"predictions": [0.7345]}'
RESPONSE = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
            b"x-Amzn-Invoked-Production-Variant: AllTraffic\r\nx-amzn-RequestId: 00000000-0000-0000-0000-000000000000"
            b"\r\n\r\n" % len(ANSWER)) + ANSWER
FAKE_AWS = {"AWS_ACCESS_KEY_ID": "bench-not-a-key", "AWS_SECRET_ACCESS_KEY": "bench-not-a-secret",
            "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}
NGINX_CONF = """worker_processes 1;
worker_cpu_affinity {affinity};
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {dir}/body;
  proxy_temp_path {dir}/proxy;
  fastcgi_temp_path {dir}/fastcgi;
  uwsgi_temp_path {dir}/uwsgi;
  scgi_temp_path {dir}/scgi;
  keepalive_requests 10000000;
  keepalive_timeout 300s;
  client_body_buffer_size 64k;
  server {{
    listen 127.0.0.1:{port};
    location / {{
      default_type application/json;
      add_header x-Amzn-Invoked-Production-Variant AllTraffic;
      return 200 '{answer}';
    }}
  }}
}}
"""


# ---------------------------------------------------------------------------------- the server


def serve(port: int) -> None:
    """Answer every HTTP/1.1 request on 127.0.0.1:port with RESPONSE, keeping connections open."""
    from sm_locust.testing.fakehttp import KeepAliveServer

    server = KeepAliveServer(lambda _head, _address: RESPONSE, port=port)
    print("ready", flush=True)
    server.serve_forever()


# ---------------------------------------------------------------------------------- the clients


class Bodies:
    """The body of the next call: the same object (`repeated`), or a new one each call (`fresh`)."""

    mode = MODES[0]
    _counter = itertools.count(1)

    @classmethod
    def next(cls) -> bytes:
        if cls.mode == "repeated":
            return BODY
        return b'%s%010d%s' % (_HEAD, next(cls._counter), _TAIL)


def user_class(kind: str, url: str):
    from locust import User, task
    from locust.contrib.fasthttp import FastHttpUser

    from sm_locust.invocation import Invocation
    from sm_locust.users import SageMakerUser

    invocation = Invocation(body=BODY, content_type="application/json")
    next_body = Bodies.next
    if kind == "raw":
        from geventhttpclient import HTTPClient
        from geventhttpclient.url import URL

        class Raw(User):
            http = None

            def on_start(self):
                if Raw.http is None:
                    Raw.http = HTTPClient.from_url(URL(url), concurrency=1024, connection_timeout=60,
                                                   network_timeout=60)
                self.fire = self.environment.events.request.fire

            @task
            def post(self):
                t0 = time.perf_counter()
                response = Raw.http.request("POST", PATH, body=next_body(),
                                            headers={"Content-Type": "application/json"})
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
                self.client.post(PATH, data=next_body(), headers={"Content-Type": "application/json"})

        return Fast
    if kind in ("boto3", "fast"):
        class Signed(SageMakerUser):
            endpoint_name = ENDPOINT
            endpoint_url = url
            if kind != "fast":  # fast: the class default, as `sm-locust run` leaves it
                transport = kind

            @task
            def post(self):
                if Bodies.mode == "repeated":
                    self.client.invoke(invocation)  # a prepared Invocation, as a payload pool sends it
                else:
                    self.invoke(next_body())  # a new body, so a new Invocation, every call

        return Signed
    raise SystemExit(f"unknown client {kind!r}; choose one of: {', '.join(CLIENTS)}")


def run_client(kind: str, url: str, users: int, seconds: float, warmup: float, modes: list[str]) -> list[dict]:
    """One Locust process: `users` users of `kind` against url; one measured window per body mode."""
    import gevent
    import locust  # noqa: F401  (gevent patching before botocore)
    from locust.env import Environment

    env = Environment(user_classes=[user_class(kind, url)])
    runner = env.create_local_runner()
    Bodies.mode = modes[0]
    runner.start(users, spawn_rate=users * 4)  # all users within the warm-up
    gevent.sleep(warmup)
    results = []
    for i, mode in enumerate(modes):
        if i:
            Bodies.mode = mode
            gevent.sleep(min(warmup, 0.5))  # the calls in flight finish in the new mode
        n0, f0 = env.stats.total.num_requests, env.stats.total.num_failures
        c0, t0 = time.process_time(), time.perf_counter()
        gevent.sleep(seconds)
        n1, f1 = env.stats.total.num_requests, env.stats.total.num_failures
        c1, t1 = time.process_time(), time.perf_counter()
        requests = n1 - n0
        results.append({"client": kind, "body": mode, "requests": requests, "failures": f1 - f0, "seconds": t1 - t0,
                        "rps": requests / (t1 - t0), "cpu_us_per_request": (c1 - c0) / max(requests, 1) * 1e6,
                        "client_cpu_pct": (c1 - c0) / (t1 - t0) * 100})
    runner.quit()
    errors = {str(e.error): e.occurrences for e in env.stats.errors.values()}
    for result in results:
        result["errors"] = dict(list(errors.items())[:3])
    return results


# ---------------------------------------------------------------------------------- the driver


def pinned(command: list[str], cpu: int | None) -> list[str]:
    if cpu is None:
        return command
    if shutil.which("taskset"):
        return ["taskset", "-c", str(cpu), *command]
    return [*command, "--cpu", str(cpu)]  # the child pins itself with os.sched_setaffinity


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
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


def child_pid(process: subprocess.Popen, wait: float = 3.0) -> int:
    """The first child's pid (the nginx worker, the gunicorn worker: the one doing the work), else the process's."""
    deadline = time.monotonic() + wait
    while True:
        try:
            children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
        except OSError:
            children = []
        if children or time.monotonic() > deadline:
            return int(children[0]) if children else process.pid
        time.sleep(0.05)


def measure(kinds: list[str], url: str, server_pid: int, args, client_cpu: int | None, modes: list[str]) -> list[dict]:
    """Run one client process per kind, all at once (`--paired`: they share the client core, so each
    ratio compares clients under the same background load), else one after the other."""
    env = {**os.environ, **FAKE_AWS}
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", "AWS_SESSION_TOKEN"):
        env.pop(name, None)
    timeout = (args.seconds + args.warmup + 1) * len(modes) + 120
    batches = [kinds] if args.paired else [[kind] for kind in kinds]
    results = []
    for batch in batches:
        s0, w0 = cpu_seconds(server_pid), time.perf_counter()
        running = []
        for kind in batch:
            command = [sys.executable, __file__, "--client", kind, "--url", url, "--users", str(args.users),
                       "--seconds", str(args.seconds), "--warmup", str(args.warmup), "--modes", ",".join(modes)]
            running.append((kind, subprocess.Popen(pinned(command, client_cpu), stdout=subprocess.PIPE,
                                                   stderr=subprocess.PIPE, text=True, env=env)))
        outputs = [(kind, *process.communicate(timeout=timeout), process.returncode) for kind, process in running]
        s1, w1 = cpu_seconds(server_pid), time.perf_counter()
        for kind, stdout, stderr, code in outputs:
            if code != 0:
                raise SystemExit(f"client {kind} failed:\n{stderr[-3000:]}")
            for result in json.loads(stdout.strip().splitlines()[-1]):
                result["server_cpu_pct"] = (s1 - s0) / (w1 - w0) * 100  # over the child's life, start included
                results.append(result)
    return results


def start_server(command: list[str], port: int, cpu: int | None, log) -> subprocess.Popen:
    process = subprocess.Popen(pinned(command, cpu), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for_port(port)
    except SystemExit:
        process.kill()
        raise
    return process


def start_nginx(port: int, cpu: int | None, log, workdir: str) -> subprocess.Popen:
    nginx = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx")
                                           if os.path.exists(p)), None)
    if nginx is None:
        raise SystemExit("--server nginx: no nginx binary (Debian/Ubuntu: apt-get install nginx)")
    affinity = "auto" if cpu is None else bin(1 << cpu)[2:]
    os.chmod(workdir, 0o755)  # nginx workers drop root privileges
    conf = Path(workdir) / "nginx.conf"
    conf.write_text(NGINX_CONF.format(affinity=affinity, dir=workdir, port=port, answer=ANSWER.decode()))
    return start_server([nginx, "-c", str(conf), "-e", str(Path(workdir) / "error.log")], port, cpu, log)


def stop(process: subprocess.Popen, sig: int = signal.SIGINT) -> None:
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def ratio_line(results: list[dict], round_: int, mode: str) -> tuple[float, float] | None:
    """fast / raw in one round and body mode: (by req/s, by CPU per call)."""
    row = {r["client"]: r for r in results if r["round"] == round_ and r["body"] == mode and not r.get("label")}
    if "raw" not in row or "fast" not in row:
        return None
    raw, fast = row["raw"], row["fast"]
    return fast["rps"] / raw["rps"], raw["cpu_us_per_request"] / fast["cpu_us_per_request"]


def table(results: list[dict], note: str) -> str:
    raw = {(r["round"], r["body"]): r["rps"] for r in results if r["client"] == "raw" and not r.get("label")}
    lines = ["| client | body | round | req/s | client CPU µs/req | client CPU % | server CPU "
             "% | req/s vs raw | failures |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        base = raw.get((r["round"], r["body"]))
        ratio = f"{r['rps'] / base:.2f}" if base and not r.get("label") else "-"
        lines.append(f"| {r['client']}{r.get('label', '')} | {r['body']} | {r['round']} | {r['rps']:,.0f} | "
                     f"{r['cpu_us_per_request']:,.0f} | {r['client_cpu_pct']:.0f} | {r['server_cpu_pct']:.0f} | "
                     f"{ratio} | {r['failures']} |")
    return "\n".join(lines) + f"\n\n{note}"


def drive(args) -> int:
    cpus = os.cpu_count() or 1
    server_cpu, client_cpu = (1, 0) if cpus >= 2 else (None, None)
    clients = args.clients.split(",") if args.clients else list(CLIENTS)
    modes = args.modes.split(",")
    if "raw" in clients:  # raw first: the floor every ratio is taken against
        clients = ["raw", *[c for c in clients if c != "raw"]]
    load = os.getloadavg()
    how = "taskset" if shutil.which("taskset") else "sched_setaffinity"
    print(f"# transport bench: {args.rounds} round(s){' of paired clients' if args.paired else ''}; "
          f"per client and body mode {args.seconds:g} s measured after "
          f"{args.warmup:g} s warm-up; {args.users} users; 1 KB POST; {args.server} server on CPU {server_cpu}, "
          f"clients on CPU {client_cpu} ({how}); load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
          flush=True)
    port = free_port()
    results: list[dict] = []
    with open(os.devnull, "wb") as log, tempfile.TemporaryDirectory(prefix="sm-locust-bench-") as workdir:
        if args.server == "nginx":
            server = start_nginx(port, server_cpu, log, workdir)
            server_pid = child_pid(server)
        else:
            server = start_server([sys.executable, __file__, "--serve", "--port", str(port)], port, server_cpu, log)
            server_pid = server.pid
        try:
            for round_ in range(1, args.rounds + 1):
                order = clients if round_ % 2 else [*clients[1:], clients[0]]  # raw first, then last
                for result in measure(order, f"http://127.0.0.1:{port}", server_pid, args, client_cpu, modes):
                    result["round"] = round_
                    results.append(result)
                    print(f"  round {round_} {result['client']} {result['body']}: {result['rps']:,.0f} req/s, "
                          f"{result['cpu_us_per_request']:,.0f} µs CPU/request"
                          + (f", errors {result['errors']}" if result["errors"] else ""), flush=True)
                for mode in modes:
                    ratio = ratio_line(results, round_, mode)
                    if ratio:
                        print(f"round {round_} {mode}: fast / raw = {ratio[0]:.2f} by req/s, {ratio[1]:.2f} by CPU "
                              f"per call", flush=True)
        finally:
            stop(server, signal.SIGQUIT if args.server == "nginx" else signal.SIGINT)
        if args.endpoint:  # the local endpoint's own ceiling, same raw client
            sys.path.insert(0, str(ROOT))
            from sm_locust.util.ports import free_port as endpoint_port

            eport = endpoint_port()
            command = [sys.executable, "-m", "sm_locust", "serve", "--port", str(eport)]
            endpoint = start_server(command, eport, server_cpu, log)
            try:
                for result in measure(["raw", "fast"], f"http://127.0.0.1:{eport}", child_pid(endpoint), args,
                                      client_cpu, ["repeated"]):
                    result["label"], result["round"] = " → local endpoint", 1
                    results.append(result)
                    print(f"  {result['client']} -> local endpoint: {result['rps']:,.0f} req/s", flush=True)
            finally:
                stop(endpoint)
    load = os.getloadavg()
    print()
    print(table(results, f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"))
    summary = []
    for mode in modes:
        ratios = [r for r in (ratio_line(results, n, mode) for n in range(1, args.rounds + 1)) if r]
        if ratios:
            by_rps, by_cpu = [r[0] for r in ratios], [r[1] for r in ratios]
            target = 0.8 if mode == "fresh" else 0.9
            summary.append(f"{mode} body: {statistics.median(by_rps):.2f} (rounds "
                           f"{', '.join(f'{x:.2f}' for x in by_rps)}) by req/s; {statistics.median(by_cpu):.2f} "
                           f"(rounds {', '.join(f'{x:.2f}' for x in by_cpu)}) by CPU per call; target >= {target}")
    if summary:
        print("\nsigned fast / raw unsigned = " + "\n  ".join(["median of the rounds:", *summary]))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="CI smoke: 1 round, 1 s per measurement, 8 users (no asserts)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    p.add_argument("--seconds", type=float, default=10.0, help="measured seconds per client and body mode (default 10)")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds before measuring (default 2)")
    p.add_argument("--users", type=int, default=32, help="Locust users per client process (default 32)")
    p.add_argument("--clients", default="", help=f"comma-separated subset of {','.join(CLIENTS)}")
    p.add_argument("--modes", default=",".join(MODES), help="body modes, comma-separated (default fresh,repeated)")
    p.add_argument("--paired", action="store_true",
                   help="run a round's clients at the same time on the client core (a shared "
                        "machine: same background load)")
    p.add_argument("--server", choices=SERVERS, default="gevent", help="the fixed-answer server (default gevent)")
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
        print(json.dumps(run_client(args.client, args.url, args.users, args.seconds, args.warmup,
                                    args.modes.split(","))))
        return 0
    if args.quick:
        args.rounds = 1
        args.seconds, args.warmup, args.users = min(args.seconds, 1.0), min(args.warmup, 0.5), min(args.users, 8)
    return drive(args)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
