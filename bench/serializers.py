"""Request and response formats, and fan-out, measured on the local endpoint: the TF-Serving comparison.

    python bench/serializers.py [--requests 200] [--workers 2] [--quick]

Why: the TF-Serving ranking case asks which payload format a client should send (JSON, a
protobuf PredictRequest, .npy bytes), which response format it should ask for (JSON, .npy, a raw
float32 buffer), and whether one 500-row request is better sent as 10 x 50 rows at once. Each
costs client CPU (encode, decode, bytes on the wire) and server time (decode, model, encode).

Each scenario sends the same 500 ranking rows, one request after another, through sm-locust's
boto3 client (`Boto3SageMakerClient`, the code a test runs; `sm_locust.users.fanout.invoke_split` for the
fan-out), to a local endpoint it starts on a free 127.0.0.1 port (2 gevent workers by default:
this machine has 2 cores, shared with the client). Per request the client encodes the rows with
the scenario's serializer, invokes, and decodes the response into an array, as an application
would. Scenarios run interleaved, 10 requests at a time, so background load on the machine hits
them alike. Printed per scenario: request and response bytes, client p50/p95 (ms, wall clock
per logical request), client CPU per request (µs, `time.process_time` around the requests
divided by their number), and, measured alone in a tight loop, the part of it spent encoding
the rows and decoding the response. All figures come from one run; `--quick` sends a few
requests only (figures printed, too noisy to quote).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import locust  # noqa: F401  (gevent monkey-patching before boto3, as everywhere else)

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from locust.env import Environment  # noqa: E402

from sm_locust.endpoint.model import sample_rows  # noqa: E402
from sm_locust.endpoint.server import LocalEndpoint  # noqa: E402
from sm_locust.invocation import Invocation  # noqa: E402
from sm_locust.payloads.split import PARTS  # noqa: E402
from sm_locust.serializers import create_serializer  # noqa: E402
from sm_locust.transport.boto3 import Boto3SageMakerClient  # noqa: E402
from sm_locust.users.fanout import invoke_split  # noqa: E402

ROWS = 500
ENDPOINT = "bench"


@dataclass(frozen=True)
class Scenario:
    group: str
    label: str
    serializer: str
    accept: str
    parts: int = 1


SCENARIOS = [
    Scenario("request", "JSON request", "json", "application/json"),
    Scenario("request", "protobuf request", "protobuf", "application/json"),
    Scenario("request", "npy request", "npy", "application/json"),
    Scenario("response", "JSON response", "protobuf", "application/json"),
    Scenario("response", "npy response", "protobuf", "application/x-npy"),
    Scenario("response", "raw response", "protobuf", "application/octet-stream"),
    Scenario("fan-out", "1 x 500 rows", "protobuf", "application/json"),
    Scenario("fan-out", "10 x 50 rows", "protobuf", "application/json", parts=10),
]


@dataclass
class Result:
    scenario: Scenario
    request_bytes: int
    response_bytes: int
    p50_ms: float
    p95_ms: float
    cpu_us: float
    failures: int
    encode_us: float = 0.0
    decode_us: float = 0.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def one_request(client: Boto3SageMakerClient, scenario: Scenario, ranking: dict, decoder) -> tuple[int, int, bool]:
    """Encode, send, decode one logical request; (request bytes, response bytes, ok)."""
    serializer = create_serializer(scenario.serializer)
    if scenario.parts == 1:
        body = serializer.serialize(ranking)
        result = client.invoke(Invocation(body=body, content_type=serializer.content_type, accept=scenario.accept))
        results, sent = [result], len(body)
    else:
        step = ROWS // scenario.parts
        parts = tuple(Invocation(body=serializer.serialize({k: v[i:i + step] for k, v in ranking.items()}),
                                 content_type=serializer.content_type, accept=scenario.accept)
                      for i in range(0, ROWS, step))
        whole = Invocation(body=b"-", extra={PARTS: parts})
        results, sent = invoke_split(client, whole), sum(len(p.body) for p in parts)
    if any(r is None for r in results):
        return sent, 0, False
    rows = sum(np.asarray(decoder.deserialize(r.body, r.content_type)["prob"]
                          if scenario.accept == "application/x-protobuf" else
                          decoder.deserialize(r.body, r.content_type)).shape[0] for r in results)
    return sent, sum(len(r.body) for r in results), rows == ROWS


def measure_all(client: Boto3SageMakerClient, ranking: dict, requests: int, warmup: int, block: int,
                codec_seconds: float) -> list[Result]:
    """Every scenario, interleaved in blocks of `block` requests so background load hits all alike."""
    decoders = [create_serializer(s.serializer) for s in SCENARIOS]
    for scenario, decoder in zip(SCENARIOS, decoders, strict=True):
        for _ in range(warmup):
            one_request(client, scenario, ranking, decoder)
    times: list[list[float]] = [[] for _ in SCENARIOS]
    cpu = [0.0] * len(SCENARIOS)
    failures = [0] * len(SCENARIOS)
    sizes = [(0, 0)] * len(SCENARIOS)
    while len(times[0]) < requests:
        for i, (scenario, decoder) in enumerate(zip(SCENARIOS, decoders, strict=True)):
            cpu0 = time.process_time()
            for _ in range(min(block, requests - len(times[i]))):
                t0 = time.perf_counter()
                sent, got, ok = one_request(client, scenario, ranking, decoder)
                times[i].append((time.perf_counter() - t0) * 1000.0)
                failures[i] += not ok
                sizes[i] = (sent, got or sizes[i][1])
            cpu[i] += time.process_time() - cpu0
    return [Result(s, sizes[i][0], sizes[i][1], percentile(times[i], 0.5), percentile(times[i], 0.95),
                   cpu[i] / requests * 1e6, failures[i], *codec_us(s, ranking, codec_seconds))
            for i, s in enumerate(SCENARIOS)]


def codec_us(scenario: Scenario, ranking: dict, seconds: float = 0.2) -> tuple[float, float]:
    """Client CPU (µs) to encode the request rows and to decode a typical response, alone."""
    from sm_locust.endpoint.codecs import encode_response

    serializer = create_serializer(scenario.serializer)
    step = ROWS // scenario.parts
    pieces = [{k: v[i:i + step] for k, v in ranking.items()} for i in range(0, ROWS, step)]
    responses = [encode_response(np.full(len(p["feat_ids"]), 0.5, np.float32), scenario.accept) for p in pieces]

    def per_call(fn) -> float:
        n, t0 = 0, time.process_time()
        while True:
            fn()
            n += 1
            if time.process_time() - t0 >= seconds:
                return (time.process_time() - t0) / n * 1e6

    encode = per_call(lambda: [serializer.serialize(p) for p in pieces])
    decode = per_call(lambda: [serializer.deserialize(body, ctype) for body, ctype in responses])
    return encode, decode


def table(results: list[Result], workers: int, requests: int) -> str:
    lines = [
        f"{ROWS} ranking rows per logical request; {requests} requests per scenario, one after another, scenarios "
        f"interleaved; local endpoint with {workers} workers on 127.0.0.1; boto3 client",
        "",
        "| scenario | request bytes | response bytes | client p50 ms | client p95 ms | client CPU µs/request "
        "| of which encode µs | decode µs |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(f"| {r.scenario.label} | {r.request_bytes:,} | {r.response_bytes:,} | {r.p50_ms:.1f} | "
                     f"{r.p95_ms:.1f} | {r.cpu_us:,.0f} | {r.encode_us:,.0f} | {r.decode_us:,.0f} |"
                     + (f" ({r.failures} failed)" if r.failures else ""))
    return "\n".join(lines)


def local_boto3_client(url: str):
    """boto3 `sagemaker-runtime` for the local endpoint: placeholder keys (the local endpoint does
    not check signatures, and no credential chain is read), retries off as in `make_boto3_client`."""
    import boto3
    from botocore.config import Config

    session = boto3.session.Session(aws_access_key_id="local", aws_secret_access_key="local", region_name="us-east-1")
    config = Config(retries={"mode": "standard", "total_max_attempts": 1}, max_pool_connections=32, tcp_keepalive=True)
    return session.client("sagemaker-runtime", endpoint_url=url, config=config)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="measured requests per scenario")
    parser.add_argument("--workers", type=int, default=2, help="local endpoint worker processes")
    parser.add_argument("--quick", action="store_true", help="a few requests per scenario (CI: figures are noise)")
    args = parser.parse_args(argv)
    requests, warmup = (5, 1) if args.quick else (args.requests, 20)
    ids, vals = sample_rows(ROWS, seed=0)
    ranking = {"feat_ids": ids, "feat_vals": vals}
    env = Environment()
    with LocalEndpoint(workers=args.workers) as endpoint:
        client = Boto3SageMakerClient(env, ENDPOINT, boto3_client=local_boto3_client(endpoint.url))
        results = measure_all(client, ranking, requests, warmup, block=min(10, requests),
                              codec_seconds=0.02 if args.quick else 0.3)
    print(table(results, args.workers, requests))
    failed = sum(r.failures for r in results)
    for error in env.stats.errors.values():
        print(f"{error.occurrences} x {error.method} {error.name}: {error.error}", file=sys.stderr)
    if failed:
        print(f"{failed} requests failed or came back with the wrong number of rows", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
