"""The serializer contract: one object in, request bytes out; response bytes in, arrays out.

A serializer is chosen by name before a test (`create_serializer("protobuf", model_name=...)`),
encodes every static body once, and may decode responses on the hot path for validation. The
format of a *response* is named by its Content-Type, not by the serializer that built the request
(a TF-Serving `inference.py` often answers a protobuf request with JSON), so `deserialize` hands a
body whose Content-Type names another known format to that format's decoder.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sm_locust.errors import UsageError


class SerializationError(UsageError):
    """An object cannot be encoded, or a body cannot be decoded, in the chosen format."""


def base_content_type(content_type: str | None) -> str:
    """`Application/JSON; charset=utf-8` -> `application/json` (empty string for None)."""
    return (content_type or "").split(";", 1)[0].strip().lower()


class Serializer:
    """Base class: `serialize(obj) -> bytes` for requests, `deserialize(data)` for responses.

    Subclasses set `name` and `default_content_type` and implement `_serialize` / `_deserialize`.
    Every serializer accepts a `content_type` option, so the header can match what a custom
    `inference.py` expects (the seed's TF-Serving handler checks for `X-protobuf`).
    Bytes given to `serialize` are taken as already encoded and returned unchanged.
    """

    name: ClassVar[str] = ""
    default_content_type: ClassVar[str] = "application/octet-stream"

    def __init__(self, content_type: str | None = None):
        self.content_type = content_type or self.default_content_type

    def __repr__(self) -> str:
        return f"{type(self).__name__}(content_type={self.content_type!r})"

    # -- requests ---------------------------------------------------------------------------
    def serialize(self, obj: Any) -> bytes:
        """Encode one request body."""
        if isinstance(obj, (bytes, bytearray, memoryview)):
            return bytes(obj)
        return self._serialize(obj)

    def custom_attributes(self, obj: Any) -> str | None:
        """A `CustomAttributes` value describing the body, for formats that need one (else None)."""
        return None

    # -- responses --------------------------------------------------------------------------
    def deserialize(self, data: bytes, content_type: str | None = None) -> Any:
        """Decode a response body; a Content-Type naming another known format is honoured."""
        from sm_locust.serializers import decoder_for

        return decoder_for(content_type, self)._deserialize(bytes(data))

    # -- for subclasses ---------------------------------------------------------------------
    def _serialize(self, obj: Any) -> bytes:  # pragma: no cover - abstract
        raise NotImplementedError

    def _deserialize(self, data: bytes) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError
