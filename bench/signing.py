"""µs per SigV4 signature for each signer (`lean`, `botocore`, `crt`), printed as a table.

    python bench/signing.py [--seconds 1.0]

Each signer signs the same InvokeEndpoint request (session token, custom attributes, target
variant) with a 1 KB and a 1 MB body; the body hash dominates at 1 MB. A boto3 `invoke_endpoint`
call costs ~1.5 ms CPU in total on the development machine (docs/facts.md), for comparison.
Credentials are fixed test values: no network, no credential lookup.
"""

from __future__ import annotations

import argparse
import time

import locust  # noqa: F401  (gevent monkey-patching before botocore, as everywhere else)

from botocore.credentials import Credentials

from sm_locust.transport.signing import SIGNERS, create_signer

URL = "https://runtime.sagemaker.us-east-1.amazonaws.com/endpoints/bench-endpoint/invocations"
HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json",
    "X-Amzn-SageMaker-Custom-Attributes": "trace=1",
    "X-Amzn-SageMaker-Target-Variant": "variant-a",
}


def per_sign_us(signer, body: bytes, seconds: float) -> float:
    signer.sign("POST", URL, HEADERS, body)  # warm caches (key, path, credentials)
    n, start = 0, time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(50):
            signer.sign("POST", URL, HEADERS, body)
        n += 50
        now = time.perf_counter()
        if now >= deadline:
            return (now - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time per measurement")
    args = parser.parse_args()
    credentials = Credentials("AKIDBENCHEXAMPLE", "bench-secret-key-not-real", "bench-token")
    bodies = {"1 KB": b"x" * 1024, "1 MB": b"x" * (1 << 20)}
    print(f"{'signer':<10}" + "".join(f"{label:>14}" for label in bodies))
    for name in SIGNERS.names():
        try:
            signer = create_signer(name, "us-east-1", credentials)
        except Exception as exc:  # e.g. awscrt not installed
            print(f"{name:<10}  unavailable: {exc}")
            continue
        row = [per_sign_us(signer, body, args.seconds) for body in bodies.values()]
        print(f"{name:<10}" + "".join(f"{us:>11.1f} µs" for us in row))


if __name__ == "__main__":
    main()
