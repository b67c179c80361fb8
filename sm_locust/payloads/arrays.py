"""Array payloads: rows sampled from a `.npy` / `.npz` file into batches, encoded once.

A `.npy` holds one array (rows on axis 0); a `.npz` holds named arrays with the same number of
rows (e.g. `feat_ids` [N,39] and `feat_vals` [N,39]), sampled together into a dict. Rows are taken
from a seeded permutation (seed 0 unless given), `batch_size` per body, wrapping around when the
file has fewer rows than needed; at most `max_bodies` distinct bodies are pre-encoded (64 by
default). Files are opened with `allow_pickle=False`: object arrays are refused.

An `.npz` is a zip archive, checked before anything is inflated (`check_npz`): at most
`MAX_NPZ_MEMBERS` members, each a `.npy` whose header declares no more bytes than the member holds,
and at most `MAX_NPZ_BYTES` inflated in all (a 3-MB zip bomb inflated to 3 GB; a member declaring
shape (10**12,) asked for 8 TB). A batch is at most `MAX_BATCH_BYTES` of rows before encoding
(8 x InvokeEndpoint's 6 MB body: no serializer encodes rows into less than an eighth of their bytes;
`--batch-size 1000000000` asked for 8 GB), refused before any row is copied, and the distinct
bodies at most `MAX_BATCHES_BYTES` in all. Bodies are sampled one at a time, each encoded before the next is drawn.
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from sm_locust.aws.runtime_api import MAX_BODY_BYTES
from sm_locust.errors import UsageError
from sm_locust.invocation import Invocation
from sm_locust.payloads.files import check_payload_path
from sm_locust.payloads.template import InvocationTemplate
from sm_locust.sanitize import clean
from sm_locust.serializers import SerializationError, Serializer
from sm_locust.serializers.numpy_formats import PICKLE_REFUSED

DEFAULT_MAX_BODIES = 64
MAX_NPZ_MEMBERS = 1_000
MAX_NPZ_BYTES = 1 << 30  # as much as any payload source read whole (payloads/files.py MAX_SOURCE_BYTES)
MAX_BATCH_BYTES = 8 * MAX_BODY_BYTES  # raw row bytes per body (module docstring)
MAX_BATCHES_BYTES = 256 << 20  # the distinct bodies sampled, before encoding: fewer bodies past it


def check_npz(path: Path) -> None:
    """A one-line UsageError for an .npz that is not a small archive of .npy members (module docstring),
    read from the zip directory and the members' headers only: nothing is inflated past a header."""
    where = repr(str(path))
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            if len(members) > MAX_NPZ_MEMBERS:
                raise UsageError(f"{where} has {len(members):,} members; an .npz payload holds at most "
                                 f"{MAX_NPZ_MEMBERS:,} arrays")
            inflated = sum(m.file_size for m in members)
            if inflated > MAX_NPZ_BYTES:
                raise UsageError(f"{where} inflates to {inflated:,} bytes; an .npz payload is at most "
                                 f"{MAX_NPZ_BYTES >> 30} GB unpacked")
            for member in members:
                if not member.filename.endswith(".npy"):
                    raise UsageError(f"{where} holds {clean(member.filename, 80)!r}, which is not an array "
                                     "(.npy); an .npz payload holds arrays only (numpy.savez)")
                with archive.open(member) as fh:
                    version = np.lib.format.read_magic(fh)
                    read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                                   else np.lib.format.read_array_header_2_0)
                    shape, _, dtype = read_header(fh)  # the header only
                    header = fh.tell()
                if dtype.hasobject:
                    raise UsageError(f"{where}: {PICKLE_REFUSED}")
                declared = math.prod(shape) * dtype.itemsize
                if declared > member.file_size - header:
                    raise UsageError(f"{where}: {clean(member.filename, 80)} declares shape {shape} "
                                     f"({declared:,} bytes) but holds {member.file_size - header:,}")
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, NotImplementedError) as exc:
        raise UsageError(f"{where} is not a readable numpy array file: {clean(exc, 200)}") from None


def _load(path: Path) -> np.ndarray | dict[str, np.ndarray]:
    check_payload_path(path)
    try:
        if path.suffix.lower() == ".npz":
            check_npz(path)
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


def batches(path: Path, batch_size: int, max_bodies: int, seed: int | None) -> Iterator[object]:
    """The request objects (arrays or dicts of arrays) sampled from the file, one at a time."""
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise UsageError(f"batch size must be a whole number >= 1; got {batch_size!r}")
    if not isinstance(max_bodies, int) or max_bodies < 1:
        raise UsageError(f"max bodies must be a whole number >= 1; got {max_bodies!r}")
    data = _load(path)
    n = _rows(data, path)
    per_row = row_bytes(data)
    check_batch_bytes(batch_size, per_row, path)
    count = min(max_bodies, max(1, math.ceil(n / batch_size)),
                max(1, MAX_BATCHES_BYTES // max(1, batch_size * per_row)))
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
