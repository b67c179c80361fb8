"""The fields every invocation of one test shares, and how a source's own fields override them.

Options given for the whole run (`--content-type`, `--accept`, `--custom-attributes`, targets)
are defaults; a source that carries its own (a JSONL line's `ContentType`, a file's extension, a
serializer's Content-Type) fills what the user left unset, and a JSONL line wins over both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sm_locust.aws.runtime_api import MAX_BODY_BYTES, check_body_size, check_header
from sm_locust.errors import UsageError
from sm_locust.invocation import Invocation
from sm_locust.serializers import Serializer, body_rows, request_rows
from sm_locust.serializers.content_types import JSON, canonical

DEFAULT_CONTENT_TYPE = canonical(JSON)
SOURCE = "encoded_from"  # Invocation.extra key holding an EncodedFrom (only with keep_source)


@dataclass
class InvocationTemplate:
    """Run-wide defaults: `content_type` (None = decided per source), `accept`, other headers."""

    content_type: str | None = None
    accept: str | None = None
    headers: dict[str, Any] = field(default_factory=dict)
    keep_source: bool = False
    """Keep each encoded object on its Invocation (`extra[SOURCE]`) so fan-out can split its rows."""
    max_body_bytes: int | None = MAX_BODY_BYTES
    """SageMaker's body limit; None when bodies are not sent (InvokeEndpointAsync reads S3)."""

    def make(self, body: bytes, *, content_type: str | None = None, where: str = "", rows: int | None = None,
             **fields: object) -> Invocation:
        """An Invocation for `body`; `content_type` is the source's guess, used when the user set none."""
        if not body:
            raise UsageError(f"{where or 'payload'}: the body is empty; SageMaker rejects empty bodies")
        merged = {k: v for k, v in self.headers.items() if v is not None}
        merged.update({k: v for k, v in fields.items() if v is not None})
        merged.setdefault("accept", self.accept)
        ctype = merged.pop("content_type", None) or self.content_type or content_type or DEFAULT_CONTENT_TYPE
        if self.max_body_bytes is not None:
            check_body_size(len(body), where or "payload", hint="fewer rows per body (--batch-size), or a smaller file")
        for name, value in fields.items():  # the source's own header values (the run-wide ones are checked up front)
            if isinstance(value, str):
                check_header(name, value, where or "payload")
        if rows is None:
            rows = body_rows(body, ctype)
        return Invocation(body=body, content_type=ctype, rows=rows, **merged)

    def encode(self, obj: object, serializer: Serializer, *, where: str = "") -> Invocation:
        """Encode one request object with `serializer` (bytes are sent as they are)."""
        body, content_type = serializer.encode(obj)
        attributes = self.headers.get("custom_attributes") or serializer.custom_attributes(obj)
        invocation = self.make(
            body,
            content_type=content_type,
            where=where,
            rows=request_rows(obj),
            custom_attributes=attributes,
        )
        if self.keep_source and not isinstance(obj, (bytes, bytearray, memoryview)):
            invocation.extra[SOURCE] = EncodedFrom(obj, serializer, self, where)
        return invocation


@dataclass(frozen=True)
class EncodedFrom:
    """How a body was built from a request object: fan-out re-encodes row slices of `obj` this way."""

    obj: Any
    serializer: Serializer
    template: InvocationTemplate
    where: str = ""
