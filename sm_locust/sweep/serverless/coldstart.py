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
from typing import Any

from sm_locust.errors import aws_error

COLD_READ_TIMEOUT_S = 120.0  # a cold start plus the model's time; longer is a failure named by its error


def runtime_client(endpoint_url: str, region: str | None, profile: str | None, extra_env: Mapping[str, str], size: int):
    """A sagemaker-runtime client with retries off (a throttle or a timeout is a figure, not hidden)."""
    # lazy: boto3 costs ~190 ms to import (python -X importtime) and only this test calls the
    # runtime directly; `--plan` and sweeps without a cold-start test never need it
    import boto3
    from botocore.config import Config

    session = boto3.session.Session(profile_name=profile or None,
                                    region_name=region or extra_env.get("AWS_DEFAULT_REGION") or None,
                                    aws_access_key_id=extra_env.get("AWS_ACCESS_KEY_ID"),
                                    aws_secret_access_key=extra_env.get("AWS_SECRET_ACCESS_KEY"))
    if session.region_name is None:
        session = boto3.session.Session(profile_name=profile or None, region_name="us-east-1",
                                        aws_access_key_id=extra_env.get("AWS_ACCESS_KEY_ID"),
                                        aws_secret_access_key=extra_env.get("AWS_SECRET_ACCESS_KEY"))
    config = Config(retries={"mode": "standard", "total_max_attempts": 1}, connect_timeout=5,
                    read_timeout=COLD_READ_TIMEOUT_S, max_pool_connections=max(10, size))
    return session.client("sagemaker-runtime", endpoint_url=endpoint_url or None, config=config)


def fire_round(client, endpoint_name: str, invocations: list, n: int, round_no: int) -> list[dict[str, Any]]:
    """`n` requests sent together (each needs an instance of its own); each one timed."""
    barrier = threading.Barrier(n)

    def one(k: int) -> dict[str, Any]:
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


