"""The cold-start test's requests: the first requests after an idle gap, sent together, each timed.

Each request needs an instance of its own when they arrive together, so each one starts an
instance; the sweep times them one by one (exact times, not histogram buckets) with a
sagemaker-runtime client whose retries are off: a throttle or a timeout is a figure, not hidden.
The runner (`serverless/runner.py`) waits the gap and calls `fire_round` once per round.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

from sm_locust.aws.clients import LOCAL_DEFAULT_REGION, Keys, Purpose
from sm_locust.aws.clients import client as aws_client
from sm_locust.errors import aws_error

COLD_READ_TIMEOUT_S = 120.0  # a cold start plus the model's time; longer is a failure named by its error


def runtime_client(endpoint_url: str, region: str | None, profile: str | None, extra_env: Mapping[str, str], size: int):
    """A sagemaker-runtime client with retries off (a throttle or a timeout is a figure, not hidden);
    `extra_env`: the run's environment for its Locust child (its region, its placeholder keys)."""
    given = extra_env.get("AWS_ACCESS_KEY_ID"), extra_env.get("AWS_SECRET_ACCESS_KEY")
    return aws_client("sagemaker-runtime", Purpose.RUNTIME, region=region or extra_env.get("AWS_DEFAULT_REGION"),
                      profile=profile, endpoint_url=endpoint_url, default_region=LOCAL_DEFAULT_REGION,
                      keys=Keys(given[0], given[1]) if given[0] and given[1] else None,
                      pool_size=max(10, size), connect_timeout=5, read_timeout=COLD_READ_TIMEOUT_S)


def fire_round(client, endpoint_name: str, invocations: list, n: int, round_no: int) -> list[dict[str, object]]:
    """`n` requests sent together (each needs an instance of its own); each one timed."""
    barrier = threading.Barrier(n)

    def one(k: int) -> dict[str, object]:
        invocation = invocations[k % len(invocations)]
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait(timeout=10)
        started = time.time()
        t0 = time.perf_counter()
        size = 0
        try:
            response = client.invoke_endpoint(EndpointName=endpoint_name, **invocation.boto3_kwargs())
            size = len(response["Body"].read())
            code = "ok"
        except Exception as exc:  # noqa: BLE001 - a throttle, a timeout, a dead endpoint: each is this request's result
            code = (aws_error(exc) or (type(exc).__name__, ""))[0]
        return {"round": round_no, "ms": round((time.perf_counter() - t0) * 1000.0, 2), "code": code,
                "bytes_out": size, "t": round(started, 3)}

    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="sm-locust-cold-start") as pool:
        return list(pool.map(one, range(n)))


