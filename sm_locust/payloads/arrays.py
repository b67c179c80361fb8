"""Array payloads: rows sampled from a `.npy` / `.npz` file into batches, encoded once.

A `.npy` holds one array (rows on axis 0); a `.npz` holds named arrays with the same number of
rows (e.g. `feat_ids` [N,39] and `feat_vals` [N,39]), sampled together into a dict. Rows are taken
from a seeded permutation (seed 0 unless given), `batch_size` per body, wrapping around when the
file has fewer rows than needed; at most `max_bodies` distinct bodies are pre-encoded (64 by
default). Files are opened with `allow_pickle=False`: object arrays are refused.

A batch whose rows hold more than `MAX_BATCH_BYTES` (8 x InvokeEndpoint's 6 MB body: no serializer
encodes rows into less than an eighth of their bytes) cannot become a body SageMaker takes: it is
refused before any row is copied (`--batch-size 200000000` once took a process to 3.3 GB). Bodies are
sampled one at a time, each encoded before the next is drawn.
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from sm_locust.aws.runtime_api import MAX_BODY_BYTES
from sm_locust.errors import UsageError
from sm_locust.invocation import Invocation
from sm_locust.payloads.files import check_payload_path
from sm_locust.payloads.template import InvocationTemplate
from sm_locust.serializers import SerializationError, Serializer
from sm_locust.serializers.numpy_formats import PICKLE_REFUSED

DEFAULT_MAX_BODIES = 64
MAX_BATCH_BYTES = 8 * MAX_BODY_BYTES  # raw row bytes per body (module docstring)


def _load(path: Path) -> np.ndarray | dict[str, np.ndarray]:
    check_payload_path(path)
    try:
        if path.suffix.lower() == ".npz":
            with np.load(path, allow_pickle=False) as npz:
                arrays = {name: npz[name] for name in npz.files}
            if not arrays:
                raise UsageError(f"{str(path)!r} holds no arrays")
            return arrays
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError:
        raise UsageError(f"payload file {str(path)!r} does not exist; pass --payload PATH to a readable file") from None
    except ValueError as exc:
        if "pickle" in str(exc).lower() or "object" in str(exc).lower():
            raise UsageError(f"{str(path)!r}: {PICKLE_REFUSED}") from None
        raise UsageError(f"{str(path)!r} is not a readable numpy array file: {exc}") from None
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        raise UsageError(f"{str(path)!r} is not a readable numpy array file: {exc}") from None


def _rows(data: np.ndarray | dict[str, np.ndarray], path: Path) -> int:
    arrays = data if isinstance(data, dict) else {"array": data}
    counts = {}
    for name, arr in arrays.items():
        if arr.dtype.hasobject:
            raise UsageError(f"{str(path)!r}: {PICKLE_REFUSED}")
        if arr.ndim == 0:
            raise UsageError(f"{str(path)!r}: {name} is a scalar; payload arrays need rows on axis 0")
        counts[name] = arr.shape[0]
    if len(set(counts.values())) > 1:
        listed = ", ".join(f"{k}={v}" for k, v in counts.items())
        raise UsageError(f"{str(path)!r}: arrays must have the same number of rows to be sampled together; "
                         f"got {listed}")
    n = next(iter(counts.values()))
    if n == 0:
        raise UsageError(f"{str(path)!r} holds no rows")
    return n


def row_bytes(data: np.ndarray | dict[str, np.ndarray]) -> int:
    """Bytes of one row (every array's row, for a .npz)."""
    arrays = data.values() if isinstance(data, dict) else [data]
    return sum(int(arr.itemsize * math.prod(arr.shape[1:])) for arr in arrays)


def check_batch_bytes(batch_size: int, per_row: int, path: Path) -> None:
    """A UsageError when `batch_size` rows of `per_row` bytes exceed MAX_BATCH_BYTES."""
    if batch_size * per_row > MAX_BATCH_BYTES:
        most = max(1, MAX_BATCH_BYTES // max(1, per_row))
        raise UsageError(f"--batch-size {batch_size:,} rows of {str(path)!r} ({per_row:,} bytes each) make a body far "
                         f"over SageMaker's 6 MB limit; use --batch-size {most:,} or fewer")


def batches(path: Path, batch_size: int, max_bodies: int, seed: int | None) -> Iterator[Any]:
    """The request objects (arrays or dicts of arrays) sampled from the file, one at a time."""
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise UsageError(f"batch size must be a whole number >= 1; got {batch_size!r}")
    if not isinstance(max_bodies, int) or max_bodies < 1:
        raise UsageError(f"max bodies must be a whole number >= 1; got {max_bodies!r}")
    data = _load(path)
    n = _rows(data, path)
    check_batch_bytes(batch_size, row_bytes(data), path)
    count = min(max_bodies, max(1, math.ceil(n / batch_size)))
    order = np.random.default_rng(0 if seed is None else seed).permutation(n)
    for k in range(count):  # one array, or one dict of arrays, per body
        idx = order[(k * batch_size + np.arange(batch_size)) % n]
        if isinstance(data, dict):
            yield {name: np.asarray(arr[idx]) for name, arr in data.items()}
        else:
            yield np.asarray(data[idx])


def load_arrays(
    path: Path,
    template: InvocationTemplate,
    serializer: Serializer,
    batch_size: int = 1,
    max_bodies: int = DEFAULT_MAX_BODIES,
    seed: int | None = None,
) -> list[Invocation]:
    out = []
    for k, obj in enumerate(batches(path, batch_size, max_bodies, seed)):
        try:
            out.append(template.encode(obj, serializer, where=f"{path} batch {k + 1}"))
        except SerializationError as exc:
            raise UsageError(f"cannot send rows of {str(path)!r} with serializer {serializer.name!r}: {exc}") from None
    return out
