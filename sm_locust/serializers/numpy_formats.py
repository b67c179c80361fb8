"""Bodies that carry one numpy array: `npy` (np.save format) and `numpy-raw` (bare buffer).

`npy` keeps dtype and shape in a header; `numpy-raw` is only the buffer, so both sides must agree
(`np.frombuffer` reads float64 unless told). A ranking dict is sent as the packed [N, 78] array
(`ranking.py`). `.npy` bytes load with `allow_pickle=False`: an object array is refused, never
unpickled. A bare buffer has rows only when its `CustomAttributes` say `shape=` (`raw_layout`).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np

from sm_locust.errors import UsageError
from sm_locust.invocation import attribute_values
from sm_locust.serializers.base import Part, SerializationError, Serializer, part_slices
from sm_locust.serializers.content_types import NPY, NUMPY_RAW, canonical
from sm_locust.serializers.ranking import as_single_array

NPY_MAGIC = b"\x93NUMPY"
PICKLE_REFUSED = (
    "refused: this .npy holds Python objects and can only be read by unpickling, which sm-locust "
    "never does (it could run arbitrary code); save a numeric array instead (np.save(path, arr.astype('float32')))"
)


def load_npy(data: bytes, what: str = "body") -> np.ndarray:
    """An array from `.npy` bytes; pickled (object) arrays are refused."""
    if not data.startswith(NPY_MAGIC):
        raise SerializationError(f"{what} is not a .npy array (it does not start with the \\x93NUMPY magic)")
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except ValueError as exc:
        if "pickle" in str(exc).lower():
            raise SerializationError(f"{what}: {PICKLE_REFUSED}") from None
        raise SerializationError(f"{what} is not a readable .npy array: {exc}") from None
    except (EOFError, OSError) as exc:
        raise SerializationError(f"{what} is a truncated .npy array: {exc}") from None


def dump_npy(arr: np.ndarray) -> bytes:
    if arr.dtype.hasobject:
        raise SerializationError("an object array cannot be sent as .npy without pickle; "
                                 f"{PICKLE_REFUSED.split('; ')[1]}")
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


def parse_shape(shape: Sequence[int] | str | None) -> tuple[int, ...] | None:
    """`"N,78"`, `"-1,78"`, `(-1, 78)` -> a reshape target (N and -1 mean 'any rows')."""
    if shape is None or shape == "":
        return None
    parts = str(shape).strip("()[] ").split(",") if isinstance(shape, str) else list(shape)
    try:
        dims = tuple(-1 if str(p).strip().upper() in ("N", "-1", "?") else int(str(p).strip()) for p in parts
                     if str(p).strip())
    except ValueError:
        raise SerializationError(f"shape {shape!r} is not a list of whole numbers such as N,78 or -1,78") from None
    if not dims or sum(d == -1 for d in dims) > 1 or any(d < -1 for d in dims):
        raise SerializationError(f"shape {shape!r} is not valid: give sizes like N,78 (at most one N/-1)")
    return dims


def parse_dtype(dtype: Any) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise SerializationError(f"unknown dtype {dtype!r}; use e.g. float32, float64, int64") from None
    if dt.kind not in "biufc":
        raise SerializationError(f"dtype {dt} is not numeric; use e.g. float32, float64, int64")
    return dt


def fit_shape(arr: np.ndarray, shape: tuple[int, ...] | None, what: str) -> np.ndarray:
    if shape is None:
        return arr
    try:
        return arr.reshape(shape)
    except ValueError:
        pretty = ",".join("N" if d == -1 else str(d) for d in shape)
        raise SerializationError(f"{what} holds {arr.size} values, which do not fit shape [{pretty}]") from None


class NpySerializer(Serializer):
    """`npy`: `np.save` bytes, `application/x-npy`; dtype and shape travel in the header."""

    name = "npy"
    format = NPY
    default_content_type = canonical(NPY)

    def __init__(self, dtype: object = None, content_type: str | None = None):
        super().__init__(content_type)
        self.dtype = None if dtype in (None, "") else parse_dtype(dtype)

    def _serialize(self, obj: object) -> bytes:
        arr = as_single_array(obj, self.dtype)
        if self.dtype is not None and arr.dtype != self.dtype:
            arr = _cast(arr, self.dtype)
        return dump_npy(arr)

    def _deserialize(self, data: bytes) -> np.ndarray:
        return load_npy(data, "response")


def _cast(arr: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if not np.can_cast(arr.dtype, dtype, casting="same_kind"):
        raise SerializationError(f"cannot send {arr.dtype} values as {dtype} without losing "
                                 f"them; choose dtype {arr.dtype}")
    return arr.astype(dtype)


class NumpyRawSerializer(Serializer):
    """`numpy-raw` (alias `numpy-string`): the bare little-endian buffer (`tobytes()`).

    The request's `CustomAttributes` describe it as `shape=N,78;dtype=float32`, the form the local
    endpoint reads; a `CustomAttributes` value set by the user wins over it.
    """

    name = "numpy-raw"
    format = NUMPY_RAW
    default_content_type = canonical(NUMPY_RAW)

    def __init__(self, dtype: object = "float32", shape: Sequence[int] | str | None = None,
                 content_type: str | None = None):
        super().__init__(content_type)
        self.dtype = parse_dtype(dtype).newbyteorder("<")
        self.shape = parse_shape(shape)

    def _array(self, obj: object) -> np.ndarray:
        arr = as_single_array(obj, self.dtype)
        arr = _cast(arr, self.dtype) if arr.dtype != self.dtype else arr
        return fit_shape(arr, self.shape, "the payload")

    def _serialize(self, obj: object) -> bytes:
        return np.ascontiguousarray(self._array(obj)).tobytes()

    def custom_attributes(self, obj: object) -> str | None:
        if isinstance(obj, (bytes, bytearray, memoryview)):
            return None
        arr = self._array(obj)
        return f"shape={','.join(str(d) for d in arr.shape)};dtype={self.dtype.newbyteorder('=').name}"

    def _deserialize(self, data: bytes) -> np.ndarray:
        return frombuffer(data, self.dtype, self.shape, "response")


def frombuffer(data: bytes, dtype: np.dtype, shape: tuple[int, ...] | None, what: str) -> np.ndarray:
    """A bare buffer as an array of `dtype`, reshaped; a size that does not fit is an error."""
    if len(data) % dtype.itemsize:
        raise SerializationError(
            f"{what} holds {len(data)} bytes, not a whole number of {dtype.newbyteorder('=').name} values "
            f"({dtype.itemsize} bytes each); check the dtype"
        )
    arr = np.frombuffer(data, dtype=dtype)
    return fit_shape(arr, shape, what)


# -- bodies read as bytes (row counts for validation, parts for fan-out) ----------------------


def npy_rows(body: bytes) -> int | None:
    """Rows in a `.npy` body: its first dimension (None for a scalar)."""
    arr = load_npy(body)
    return int(arr.shape[0]) if arr.ndim else None


def split_npy(body: bytes, k: int, where: str, custom_attributes: str | None = None) -> list[Part]:
    """K `.npy` bodies of consecutive rows."""
    arr = load_npy(body, where)
    if arr.ndim == 0:
        raise UsageError(f"{where}: cannot split a scalar .npy body into rows")
    return [Part(dump_npy(arr[s]), s.stop - s.start, custom_attributes) for s in part_slices(arr.shape[0], k, where)]


def raw_layout(custom_attributes: str | None) -> tuple[np.dtype, tuple[int, ...]] | None:
    """(dtype, shape) of a bare buffer from its CustomAttributes (dtype float32 unless given);
    None when they give no `shape=`, so its rows are unknown."""
    values = attribute_values(custom_attributes)
    shape = parse_shape(values.get("shape"))
    if shape is None:
        return None
    return parse_dtype(values.get("dtype", "float32")).newbyteorder("<"), shape


def with_shape(custom_attributes: str, shape: Sequence[int]) -> str:
    """`custom_attributes` with its `shape=` value replaced by `shape`."""
    text = ",".join(str(d) for d in shape)
    return ";".join(f"shape={text}" if p.strip().lower().startswith("shape=") else p
                    for p in custom_attributes.split(";"))


def split_raw(body: bytes, k: int, where: str, custom_attributes: str | None = None) -> list[Part]:
    """K bare buffers of consecutive rows, each described by its own `shape=` custom attribute."""
    layout = raw_layout(custom_attributes)
    if layout is None or custom_attributes is None:
        raise UsageError(f"{where}: a bare buffer has rows only when its custom attributes say shape=")
    arr = frombuffer(body, layout[0], layout[1], where)
    return [Part(arr[s].tobytes(), s.stop - s.start, with_shape(custom_attributes, arr[s].shape))
            for s in part_slices(arr.shape[0], k, where)]
