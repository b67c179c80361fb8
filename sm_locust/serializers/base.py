"""The serializer contract: one object in, request bytes out; response bytes in, arrays out.

A serializer is chosen by name (`create_serializer`), encodes static bodies once and may decode
responses for validation. A response's format is named by its Content-Type, not by the request's
serializer: `deserialize` hands it to that format's decoder (each class names its `format`; the base
class registers subclasses, so this module imports none). Fan-out splits a body into K parts of
consecutive rows in its own format (`Part`, `part_slices`; see `rows.py`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any, ClassVar, NamedTuple

from sm_locust.errors import UsageError
from sm_locust.serializers.content_types import NUMPY_RAW, base_content_type, canonical, format_of


class SerializationError(UsageError):
    """An object cannot be encoded, or a body cannot be decoded, in the chosen format."""


class Part(NamedTuple):
    """One part of a split body: its bytes, its rows and the CustomAttributes that describe it."""

    body: bytes
    rows: int
    custom_attributes: str | None = None


def common_rows(arrays: Iterable[Any]) -> int | None:
    """The number of rows (first dimension) every array has; None when they differ, when one is a
    scalar, or when there are none."""
    rows = {int(a.shape[0]) if a.ndim else None for a in arrays}
    return rows.pop() if len(rows) == 1 else None


def part_slices(n: int, k: int, where: str) -> list[slice]:
    """K consecutive row ranges covering n rows, sizes differing by at most one."""
    if n < k:
        raise UsageError(
            f"{where}: {n} row{'s' if n != 1 else ''} cannot be split into {k} parts; "
            "--split needs at least K rows per request (raise --batch-size or lower --split)"
        )
    q, r = divmod(n, k)
    out, start = [], 0
    for i in range(k):
        size = q + (1 if i < r else 0)
        out.append(slice(start, start + size))
        start += size
    return out


class Serializer:
    """Base class: `serialize(obj) -> bytes` for requests, `deserialize(data)` for responses.

    Subclasses set `name` and `default_content_type` and implement `_serialize` / `_deserialize`.
    Every serializer accepts a `content_type` option, so the header can match what a custom
    `inference.py` expects (the seed's TF-Serving handler checks for `X-protobuf`).
    Bytes given to `serialize` are taken as already encoded and returned unchanged.
    """

    name: ClassVar[str] = ""
    format: ClassVar[str | None] = None
    """The wire format this serializer reads (`content_types.FORMATS` key); None: bytes as they are."""
    default_content_type: ClassVar[str] = canonical(NUMPY_RAW)
    _readers: ClassVar[dict[str, type[Serializer]]] = {}

    def __init_subclass__(cls, **kwargs: object):
        super().__init_subclass__(**kwargs)
        if cls.format is not None:
            Serializer._readers.setdefault(cls.format, cls)  # the first class for a format reads it

    def __init__(self, content_type: str | None = None):
        self.content_type = content_type or self.default_content_type

    def __repr__(self) -> str:
        return f"{type(self).__name__}(content_type={self.content_type!r})"

    # -- requests ---------------------------------------------------------------------------
    def serialize(self, obj: object) -> bytes:
        """Encode one request body."""
        if isinstance(obj, (bytes, bytearray, memoryview)):
            return bytes(obj)
        return self._serialize(obj)

    def encode(self, obj: object) -> tuple[bytes, str]:
        """One request body and the Content-Type it goes with (a format whose Content-Type describes
        each body, such as Triton's `json-header-size=N`, gives the body's own)."""
        body = self.serialize(obj)
        return body, self.content_type_of(body)

    def content_type_of(self, body: bytes) -> str:
        """The Content-Type of an encoded body (the serializer's, unless its format describes each body)."""
        return self.content_type

    def custom_attributes(self, obj: object) -> str | None:
        """A `CustomAttributes` value describing the body, for formats that need one (else None)."""
        return None

    # -- responses --------------------------------------------------------------------------
    def deserialize(self, data: bytes, content_type: str | None = None) -> Any:
        """Decode a response body; a Content-Type naming another known format is honoured."""
        return decoder_for(content_type, self)._deserialize_typed(bytes(data), content_type)

    # -- for subclasses ---------------------------------------------------------------------
    def _serialize(self, obj: object) -> bytes:  # pragma: no cover - abstract
        raise NotImplementedError

    def _deserialize(self, data: bytes) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _deserialize_typed(self, data: bytes, content_type: str | None) -> Any:
        """`_deserialize`, for formats whose Content-Type carries what decoding needs (Triton's header size)."""
        return self._deserialize(data)


@functools.cache
def _reader(format_name: str) -> Serializer:
    return Serializer._readers[format_name]()


def decoder_for(content_type: str | None, fallback: Serializer) -> Serializer:
    """The serializer that decodes a response of `content_type`; `fallback` when it is the
    fallback's own type, unknown or absent. A bare buffer stays with raw/numpy-raw fallbacks."""
    kind = base_content_type(content_type)
    if not kind or kind == base_content_type(fallback.content_type):
        return fallback
    fmt = format_of(kind)
    if fmt is None or fmt == fallback.format or fmt not in Serializer._readers:
        return fallback
    if fmt == NUMPY_RAW and fallback.name == "raw":  # raw keeps a bare buffer as bytes
        return fallback
    return _reader(fmt)
