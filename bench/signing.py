"""µs per SigV4 signature for each signer (`lean`, `botocore`, `crt`), fresh and repeated bodies, as a table.

    python bench/signing.py [--seconds 1.0]    # CPU seconds per measurement

Each signer signs the same InvokeEndpoint request (session token, custom attributes, target
variant) with a 1 KB and a 1 MB body, two ways: `fresh`, a new body object with new content on
every call (the time to make it is measured alone and subtracted), and `repeated`, the same body
object every call (the `lean` signer then reuses the signature within the second). The body hash
dominates at 1 MB. A boto3 `invoke_endpoint` call costs ~1.5 ms CPU in total on the development
machine (docs/facts.md), for comparison. Credentials are fixed test values: no network, no
credential lookup.
"""

from __future__ import annotations

import argparse
import itertools
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


def per_call_us(call, seconds: float) -> float:
    call()  # warm caches (key, path, credentials)
    n, start = 0, time.process_time()  # CPU time: a shared machine's other work is not counted
    deadline = start + seconds
    while True:
        for _ in range(50):
            call()
        n += 50
        now = time.process_time()
        if now >= deadline:
            return (now - start) / n * 1e6


def fresh_bodies(size: int):
    """A new body object with new content on each call (the last 10 bytes count up)."""
    head = b"x" * (size - 10)
    counter = itertools.count()
    return lambda: head + b"%010d" % next(counter)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time per measurement")
    args = parser.parse_args()
    credentials = Credentials("AKIDBENCHEXAMPLE", "bench-secret-key-not-real", "bench-token")
    sizes = {"1 KB": 1024, "1 MB": 1 << 20}
    columns = [f"{label} {mode}" for label in sizes for mode in ("fresh", "repeated")]
    print(f"{'signer':<10}" + "".join(f"{c:>18}" for c in columns))
    making = {label: per_call_us(fresh_bodies(size), args.seconds) for label, size in sizes.items()}
    for name in SIGNERS.names():
        try:
            signer = create_signer(name, "us-east-1", credentials)
        except Exception as exc:  # e.g. awscrt not installed
            print(f"{name:<10}  unavailable: {exc}")
            continue
        row = []
        for label, size in sizes.items():
            new_body, same = fresh_bodies(size), b"x" * size
            def fresh(signer=signer, new_body=new_body):
                return signer.sign("POST", URL, HEADERS, new_body())

            def repeated(signer=signer, same=same):
                return signer.sign("POST", URL, HEADERS, same)

            row.append(per_call_us(fresh, args.seconds) - making[label])
            row.append(per_call_us(repeated, args.seconds))
        print(f"{name:<10}" + "".join(f"{us:>15.1f} µs" for us in row))
    print(f"(making a fresh body, subtracted above: {', '.join(f'{k} {v:.1f} µs' for k, v in making.items())})")


if __name__ == "__main__":
    main()
