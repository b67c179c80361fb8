"""Publishing bench: what `--publish` costs the load, measured with it off and on in one run.

    python bench/publish.py                     # 9 slices of 20 s (off, on, ..., off), 10-s periods, 32 users
    python bench/publish.py --slices 5 --slice-seconds 10 --period 1    # shorter; the costliest period

One Locust process (an in-process Environment and local runner, pinned to CPU 0) runs `SageMakerUser`s
with the default transport and no wait time against a stand-in endpoint that answers every request at
once (`sm_locust.testing.fakehttp.KeepAliveServer`, a process pinned to CPU 1), so the client's core is
the limit: the most sensitive setting for the cost of anything else in the process. The run's
`RunRecorder` samples the timeline as in every run. The run is cut into slices that alternate
publishing off and on: during an "on" slice the live publisher runs as on a master (the 1-s ticker,
periods closed and buffered, the sender greenlet sending to a moto CloudWatch server on CPU 1), and
this script scrapes the Prometheus /metrics once a second. The figure is the throughput of the "on"
slices against the "off" slices around them (each "on" slice against the mean of its neighbours,
then the median), and the client CPU per request. Printed with the load average, as figures, never
as a pass / fail: the target is a cost <= 2 %. Only 127.0.0.1; placeholder credentials.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
ENDPOINT = "bench"
ANSWER = b'{"predictions": [0.5]}'
RESPONSE = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nx-Amzn-Invoked-Production-Variant: AllTraffic\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listens on 127.0.0.1:{port}")


def pin(cpu: int) -> None:
    if hasattr(os, "sched_setaffinity") and os.cpu_count() and os.cpu_count() > cpu:
        os.sched_setaffinity(0, {cpu})


def serve(port: int) -> None:
    pin(1)
    from sm_locust.testing.fakehttp import KeepAliveServer

    KeepAliveServer(lambda _head, _address: RESPONSE, port=port).serve_forever()


def run(args) -> int:
    pin(0)
    import gevent
    import locust  # noqa: F401  (gevent patching before boto3)
    from locust import task
    from locust.env import Environment

    import boto3

    from sm_locust.config.endpoint import SageMakerSettings
    from sm_locust.invocation import Invocation
    from sm_locust.publish.live import LivePublisher
    from sm_locust.publish.options import PublishSettings
    from sm_locust.record.recorder import RunRecorder, attach_recorder
    from sm_locust.users import SageMakerUser

    invocation = Invocation(body=b'{"instances": [[1, 2, 3, 4]]}', content_type="application/json")

    class Bench(SageMakerUser):
        endpoint_name = ENDPOINT
        endpoint_url = args.url

        @task
        def post(self):
            self.client.invoke(invocation)

    env = Environment(user_classes=[Bench])
    runner = env.create_local_runner()
    recorder = attach_recorder(env, RunRecorder(env, None, endpoint=ENDPOINT))
    cloudwatch = boto3.client("cloudwatch", endpoint_url=args.moto, region_name="us-east-1")
    metrics_port = free_port()
    settings = PublishSettings(cloudwatch=True, prometheus=("127.0.0.1", metrics_port), period_s=args.period)
    publisher = LivePublisher(env, settings, SageMakerSettings(endpoint_name=ENDPOINT), recorder,
                              cloudwatch=cloudwatch).start()
    for event, handler in ((env.events.test_start, publisher.on_test_start),
                           (env.events.test_stop, publisher.on_test_stop), (env.events.quit, publisher.on_quit)):
        event.remove_listener(handler)  # the slices switch it, not the test's events

    scraping = {"on": False, "scrapes": 0}

    def scrape_forever():
        while True:
            gevent.sleep(1.0)
            if scraping["on"]:
                with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as answer:
                    answer.read()
                scraping["scrapes"] += 1

    runner.start(args.users, spawn_rate=min(100, args.users * 4))
    gevent.sleep(args.warmup)
    scraper = gevent.spawn(scrape_forever)
    slices = []
    for i in range(args.slices):
        on = i % 2 == 1
        if on:
            publisher.on_test_start()
            scraping["on"] = True
        n0, c0, t0 = env.stats.total.num_requests, time.process_time(), time.perf_counter()
        gevent.sleep(args.slice_seconds)
        n1, c1, t1 = env.stats.total.num_requests, time.process_time(), time.perf_counter()
        if on:
            scraping["on"] = False
            publisher.on_test_stop()
        slices.append({"on": on, "rps": (n1 - n0) / (t1 - t0), "cpu_us": (c1 - c0) / max(1, n1 - n0) * 1e6})
        print(f"slice {i + 1}: publishing {'on ' if on else 'off'} {slices[-1]['rps']:8.0f} req/s  "
              f"{slices[-1]['cpu_us']:6.1f} µs CPU/request", flush=True)
    scraper.kill()
    runner.stop()
    gevent.sleep(0.5)
    budget = cpu_budget(publisher, env, args.period)
    publisher.on_quit()  # the sender's last sends, as at the end of a run
    report = publisher.report()["cloudwatch"]
    runner.quit()
    ratios = []
    for i, s in enumerate(slices):
        if s["on"] and i + 1 < len(slices):
            ratios.append(s["rps"] / statistics.mean([slices[i - 1]["rps"], slices[i + 1]["rps"]]))
    off = [s for s in slices if not s["on"]]
    on = [s for s in slices if s["on"]]
    cost = 1 - statistics.median(ratios) if ratios else float("nan")
    print(f"\noff: {statistics.mean(s['rps'] for s in off):.0f} req/s, {statistics.mean(s['cpu_us'] for s in off):.1f} "
          f"µs CPU/request; on: {statistics.mean(s['rps'] for s in on):.0f} req/s, "
          f"{statistics.mean(s['cpu_us'] for s in on):.1f} µs CPU/request")
    print(f"publishing cost: {cost * 100:.2f} % of throughput (median of {len(ratios)} on-slices against their "
          f"neighbours: {', '.join(f'{r:.3f}' for r in ratios)})")
    print(f"published: {report['data_points']} data points in {report['calls']} calls, {report['retries']} retries, "
          f"{report['dropped']} dropped; {scraping['scrapes']} scrapes of /metrics; period {args.period} s")
    per_second = budget["tick_us"] + budget["scrape_us"] + (budget["period_us"] + budget["call_us"]) / args.period
    load_cpu_us = statistics.mean(s["cpu_us"] for s in off) * statistics.mean(s["rps"] for s in off)
    at_4000 = statistics.mean(s["cpu_us"] for s in off) * 4000
    print(f"CPU accounting (the publishing work timed alone on this run's stats, {budget['requests']:,} requests, "
          f"{budget['buckets']} latency buckets): tick {budget['tick_us']:.1f} µs/s, period close "
          f"{budget['period_us']:.0f} µs, a PutMetricData call to the stand-in {budget['call_us']:.0f} µs "
          f"({budget['serialize_us']:.0f} µs of it botocore without the network), a /metrics scrape "
          f"{budget['scrape_us']:.0f} µs ({budget['collect_us']:.0f} µs of it the collector) -> {per_second:.0f} µs "
          f"of CPU per second (one scrape a second, one call per {args.period}-s period)")
    off_rps = statistics.mean(s["rps"] for s in off)
    print(f"  = {per_second / load_cpu_us * 100:.3f} % of this run's CPU ({load_cpu_us / 1e6:.2f} CPU-s per second at "
          f"{off_rps:.0f} req/s), {per_second / at_4000 * 100:.3f} % of what 4,000 req/s take at "
          f"{statistics.mean(s['cpu_us'] for s in off):.1f} µs per request")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
    return 0


def cpu_budget(publisher, env, period_s: int, rounds: int = 200) -> dict:
    """CPU time of each piece of publishing work, timed alone (no I/O) on the run's real stats."""
    from botocore.stub import Stubber
    from prometheus_client import CollectorRegistry, generate_latest

    from sm_locust.publish.interval import difference
    from sm_locust.publish.metric_data import interval_datums
    from sm_locust.publish.prometheus import RunCollector
    from sm_locust.record.recorder import counted_entry

    def timed(fn, n: int) -> float:
        c0 = time.process_time()
        for _ in range(n):
            fn()
        return (time.process_time() - c0) / n * 1e6

    now = time.time()
    before = publisher._read(now - period_s)  # noqa: SLF001 - the bench times the publisher's own reading
    ring = publisher._ring  # noqa: SLF001
    tick_us = timed(lambda: ring.append((now, counted_entry(env.stats).total_response_time)), rounds)
    datums = []

    def close_period():
        datums[:] = interval_datums(difference(before, publisher._read(now), now - period_s), publisher.dims, 1)  # noqa: SLF001

    period_us = timed(close_period, rounds)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(RunCollector(publisher._view()))  # noqa: SLF001
    collect_us = timed(lambda: generate_latest(registry), rounds)
    client = publisher.sender.client
    with Stubber(client) as stub:
        for _ in range(rounds):
            stub.add_response("put_metric_data", {})
        serialize_us = timed(lambda: client.put_metric_data(Namespace="sm-locust", MetricData=datums), rounds)
    # with the users stopped nothing else runs in this process: process time is the call's own, both ways
    call_us = timed(lambda: client.put_metric_data(Namespace="sm-locust", MetricData=datums), 50)
    url = f"http://127.0.0.1:{publisher.settings.prometheus[1]}/metrics"

    def fetch():
        with urllib.request.urlopen(url, timeout=5) as answer:
            answer.read()

    scrape_us = timed(fetch, 50)  # the server's side and this script's client side: an upper bound
    return {"tick_us": tick_us, "period_us": period_us, "scrape_us": scrape_us, "call_us": call_us,
            "collect_us": collect_us, "serialize_us": serialize_us,
            "requests": env.stats.total.num_requests, "buckets": len(env.stats.total.response_times)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=32)
    parser.add_argument("--slices", type=int, default=9, help="alternating off / on slices, off first and last "
                        "(default 9)")
    parser.add_argument("--slice-seconds", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--period", type=int, default=10, choices=(1, 5, 10, 30, 60))
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)  # the server process
    parser.add_argument("--url", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--moto", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve)
        return 0
    if args.url:
        return run(args)
    port, moto_port = free_port(), free_port()
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}
    moto_bin = str(Path(sys.executable).parent / "moto_server")
    children = [subprocess.Popen([sys.executable, __file__, "--serve", str(port)], env=env,
                                 stderr=subprocess.DEVNULL),  # its connection-reset noise when the client ends
                subprocess.Popen(["taskset", "-c", "1", moto_bin, "-H", "127.0.0.1", "-p", str(moto_port)]
                                 if _has_taskset() else [moto_bin, "-H", "127.0.0.1", "-p", str(moto_port)],
                                 env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        wait_for_port(port)
        wait_for_port(moto_port)
        return subprocess.call([sys.executable, __file__, "--url", f"http://127.0.0.1:{port}", "--moto",
                                f"http://127.0.0.1:{moto_port}", "--users", str(args.users), "--slices",
                                str(args.slices), "--slice-seconds", str(args.slice_seconds), "--warmup",
                                str(args.warmup), "--period", str(args.period)], env=env)
    finally:
        for child in children:
            child.terminate()
            child.wait(10)


def _has_taskset() -> bool:
    from shutil import which

    return which("taskset") is not None


if __name__ == "__main__":
    sys.exit(main())
