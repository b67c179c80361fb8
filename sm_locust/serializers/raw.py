"""`raw`: bodies sent exactly as given (images, audio, pre-encoded requests).

Bytes go out unchanged, text as UTF-8, an array as its C-order buffer. Responses come back as
the bytes received; use `numpy-raw` to read a buffer as an array. Set `content_type` to what the
model expects (`image/jpeg`, ...).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from sm_locust.serializers.base import SerializationError, Serializer
from sm_locust.serializers.content_types import NUMPY_RAW, canonical


class RawSerializer(Serializer):
    """`raw`: pass-through, `application/octet-stream` unless `content_type` says otherwise."""

    name = "raw"
    default_content_type = canonical(NUMPY_RAW)  # a bare buffer; responses stay bytes (format None)

    def _serialize(self, obj: object) -> bytes:
        if isinstance(obj, str):
            return obj.encode("utf-8")
        if isinstance(obj, np.ndarray) and not obj.dtype.hasobject:
            return np.ascontiguousarray(obj).tobytes()
        kind = "a dict" if isinstance(obj, Mapping) else type(obj).__name__
        raise SerializationError(f"the raw serializer sends bytes, text or an array as they are, not {kind}; use json, "
                                 "npy or protobuf")

    def _deserialize(self, data: bytes) -> bytes:
        return data
