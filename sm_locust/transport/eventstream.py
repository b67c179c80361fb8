"""The AWS event-stream binary framing (`application/vnd.amazon.eventstream`): an encoder.

Each message: prelude (total and headers lengths, uint32 BE, and their CRC32), headers, payload,
and a CRC32 trailer. SageMaker sends `PayloadPart` events and mid-stream failures as exceptions
(`ModelStreamError`, `InternalStreamFailure`) with a JSON payload. Frames written here decode
identically with botocore's `EventStreamBuffer`, so the local endpoint streams what SageMaker does.
"""

from __future__ import annotations

import json
import struct
from binascii import crc32
from collections.abc import Mapping

CONTENT_TYPE = "application/vnd.amazon.eventstream"
PAYLOAD_PART = "PayloadPart"
MODEL_STREAM_ERROR = "ModelStreamError"
INTERNAL_STREAM_FAILURE = "InternalStreamFailure"

# header value types (botocore.eventstream.EventStreamHeaderParser._HEADER_TYPE_MAP)
_TRUE, _FALSE, _BYTE, _SHORT, _INT, _LONG, _BYTES, _STRING, _TIMESTAMP, _UUID = range(10)
_PRELUDE = struct.Struct(">II")
_CRC = struct.Struct(">I")
MAX_PAYLOAD = 24 * 1024 * 1024  # botocore refuses larger payloads
MAX_HEADERS = 128 * 1024
MIN_FRAME = 16  # prelude (12) + message CRC (4)
MAX_FRAME = MIN_FRAME + MAX_HEADERS + MAX_PAYLOAD  # the largest frame botocore reads; a longer claim is refused


def _encode_header(name: str, value: object) -> bytes:
    raw_name = name.encode("utf-8")
    if len(raw_name) > 255:
        raise ValueError(f"event-stream header name longer than 255 bytes: {name!r}")
    head = struct.pack(">B", len(raw_name)) + raw_name
    if value is True:
        return head + bytes((_TRUE,))
    if value is False:
        return head + bytes((_FALSE,))
    if isinstance(value, int):
        return head + struct.pack(">Bq", _LONG, value)
    if isinstance(value, (bytes, bytearray)):
        return head + struct.pack(">BH", _BYTES, len(value)) + bytes(value)
    if isinstance(value, str):
        data = value.encode("utf-8")
        if len(data) > 0xFFFF:
            raise ValueError(f"event-stream header {name!r} value longer than 65535 bytes")
        return head + struct.pack(">BH", _STRING, len(data)) + data
    raise TypeError(f"event-stream header {name!r}: unsupported value type {type(value).__name__}")


def encode_message(headers: Mapping[str, object], payload: bytes = b"") -> bytes:
    """One event-stream message with the given headers (str, bytes, int, bool) and payload."""
    raw_headers = b"".join(_encode_header(k, v) for k, v in headers.items())
    if len(raw_headers) > MAX_HEADERS:
        raise ValueError(f"event-stream headers of {len(raw_headers)} bytes exceed {MAX_HEADERS}")
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"event-stream payload of {len(payload)} bytes exceeds {MAX_PAYLOAD}")
    total = _PRELUDE.size + _CRC.size + len(raw_headers) + len(payload) + _CRC.size
    prelude = _PRELUDE.pack(total, len(raw_headers))
    head = prelude + _CRC.pack(crc32(prelude) & 0xFFFFFFFF) + raw_headers
    return head + payload + _CRC.pack(crc32(payload, crc32(head)) & 0xFFFFFFFF)


def encode_event(
    event_type: str,
    payload: bytes,
    message_type: str = "event",
    content_type: str = "application/octet-stream",
) -> bytes:
    """An event frame; `encode_event("PayloadPart", b"...")` is one SageMaker stream chunk."""
    return encode_message(
        {":event-type": event_type, ":content-type": content_type, ":message-type": message_type},
        bytes(payload),
    )


def encode_payload_part(data: bytes) -> bytes:
    """A `PayloadPart` event carrying `data` (the `Bytes` member)."""
    return encode_event(PAYLOAD_PART, data)


def encode_exception(
    exception_type: str = MODEL_STREAM_ERROR, message: str = "", error_code: str | None = None
) -> bytes:
    """A modeled exception frame (`ModelStreamError`, `InternalStreamFailure`), as SageMaker sends:
    compact JSON `{"Message":...,"ErrorCode":...}` (tests/fixtures/wire/sagemaker/).

    botocore raises it as `EventStreamError` with code `exception_type` and this message.
    """
    body: dict[str, str] = {"Message": message}
    if error_code is not None:
        body["ErrorCode"] = error_code
    return encode_message(
        {
            ":exception-type": exception_type,
            ":content-type": "application/json",
            ":message-type": "exception",
        },
        json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode(),
    )


def encode_error(error_code: str, error_message: str = "") -> bytes:
    """An unmodeled error frame (`:message-type: error`, code and message in headers)."""
    return encode_message(
        {":error-code": error_code, ":error-message": error_message, ":message-type": "error"}
    )


def frame_length(prelude: bytes) -> int:
    """Total length of the frame whose first 4+ bytes are `prelude`."""
    return struct.unpack_from(">I", prelude)[0]
