"""How fast the Triton serializers encode bodies: issue 29 asks >= 20,000 bodies/s for [4,512] INT32 inputs.

    python bench/triton.py [--bodies 20000] [--repeats 5]

Why: bodies are pre-encoded before a test (`--max-bodies`, 64 by default), so encoding never sits
on the request path; but a large `--max-bodies`, a sweep's checks and fan-out's parts all encode
again, and a slow encoder would show there first. Each case encodes `--bodies` request objects,
each a distinct {"input_ids": [4,512], "attention_mask": [4,512]} (as `.npz` batches are), with
`serializer.encode` (body and Content-Type, exactly what the payload pool calls), `--repeats`
times; printed per case: the best and the median rate in bodies/s, and the body size. Cases:
int32 arrays sent as INT32 (no cast), int64 arrays sent as INT32 (`--input-datatypes`, each value
checked to fit: what a tokenizer's output costs), in the binary (`triton`) and JSON
(`triton-json`) kinds. The machine is shared: the load average is printed beside the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sm_locust.serializers import create_serializer  # noqa: E402

TARGET = 20_000


def requests(count: int, dtype: str) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 30522, (count, 4, 512)).astype(dtype)
    mask = np.ones((count, 4, 512), dtype=dtype)
    return [{"input_ids": ids[i], "attention_mask": mask[i]} for i in range(count)]


def rate(serializer, objects: list, repeats: int) -> tuple[float, float, int]:
    rates = []
    size = 0
    for _ in range(repeats):
        start = time.perf_counter()
        for obj in objects:
            body, _ = serializer.encode(obj)
        rates.append(len(objects) / (time.perf_counter() - start))
        size = len(body)
    return max(rates), statistics.median(rates), size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bodies", type=int, default=20_000, help="request objects encoded per repeat")
    parser.add_argument("--repeats", type=int, default=5, help="repeats per case (best and median printed)")
    args = parser.parse_args()
    cases = [("triton, int32 as INT32", "triton", "int32", None),
             ("triton, int64 as INT32 (checked)", "triton", "int64", "input_ids=INT32,attention_mask=INT32"),
             ("triton-json, int32 as INT32", "triton-json", "int32", None),
             ("triton-json, int64 as INT32 (checked)", "triton-json", "int64", "input_ids=INT32,attention_mask=INT32")]
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    worst = None
    for label, name, dtype, datatypes in cases:
        serializer = create_serializer(name, output_names="logits", input_datatypes=datatypes)
        best, median, size = rate(serializer, requests(args.bodies, dtype), args.repeats)
        print(f"{label:39s} best {best:9,.0f} bodies/s, median {median:9,.0f} bodies/s, {size:,} bytes per body")
        worst = median if worst is None else min(worst, median)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    verdict = "meets" if worst is not None and worst >= TARGET else "misses"
    print(f"slowest median: {worst:,.0f} bodies/s: {verdict} the {TARGET:,} bodies/s target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
