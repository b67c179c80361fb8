"""Payloads read from files: one file sent verbatim, or every file of a folder.

A body's Content-Type comes from the user's override, else from the file extension
(`EXTENSION_TYPES`, whose formats are the serializers' Content-Type table, then the system MIME
table), else application/json for a single file and application/octet-stream in a folder.
"""

from __future__ import annotations

import mimetypes
import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

from sm_locust.aws.runtime_api import MAX_BODY_BYTES
from sm_locust.errors import UsageError
from sm_locust.invocation import Invocation
from sm_locust.payloads.template import InvocationTemplate
from sm_locust.serializers.content_types import CSV, JSON, JSON_LINES, NPY, NUMPY_RAW, PROTOBUF, canonical

MAX_SOURCE_BYTES = 1 << 30  # a payload source (JSONL, pickle, prompts) is read whole and kept, encoded, in memory
BODY_HINT = "a file is sent as one body: split it, or use --async-input-location for larger inputs"

EXTENSION_TYPES = {
    ".json": canonical(JSON),
    ".jsonl": canonical(JSON_LINES),
    ".csv": canonical(CSV),
    ".txt": "text/plain",
    ".npy": canonical(NPY),
    ".pb": canonical(PROTOBUF),
    ".protobuf": canonical(PROTOBUF),
    ".bin": canonical(NUMPY_RAW),
    ".raw": canonical(NUMPY_RAW),
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".png": "image/png",
    ".wav": "audio/wav",
}


def guess_content_type(path: Path, default: str | None = canonical(JSON)) -> str | None:
    """The Content-Type a file's extension implies, or `default`."""
    suffix = path.suffix.lower()
    if suffix in EXTENSION_TYPES:
        return EXTENSION_TYPES[suffix]
    return mimetypes.guess_type(path.name)[0] or default


def check_payload_path(path: str | Path, what: str = "payload file") -> os.stat_result:
    """The file's status when it is a regular file, else a one-line UsageError: a FIFO would block the
    read forever and a device (/dev/zero) never ends; a payload is read whole before the test starts."""
    p = Path(path)
    try:
        status = p.stat()
    except FileNotFoundError:
        raise UsageError(f"{what} {str(p)!r} does not exist; pass --payload PATH to a readable file") from None
    except OSError as exc:
        raise UsageError(f"cannot read {what} {str(p)!r}: {exc.strerror}") from None
    if stat.S_ISDIR(status.st_mode):
        raise UsageError(f"payload {str(p)!r} is a folder; pass --payload PATH to a file") from None
    if not stat.S_ISREG(status.st_mode):
        raise UsageError(f"{what} {str(p)!r} is not a regular file (a FIFO, device or socket); a payload is read "
                         "whole before the test starts: save it to a file and pass that")
    return status


def read_payload_file(path: str | Path, max_bytes: int = MAX_SOURCE_BYTES, what: str = "payload file",
                      hint: str = "") -> bytes:
    """The bytes of a payload file (at most `max_bytes`), or a one-line UsageError saying why it cannot
    be read. The read itself is bounded: a file that grows, or one under /proc that claims 0 bytes,
    cannot make it hold more."""
    p = Path(path)
    check_payload_path(p, what)
    try:
        with open(p, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except IsADirectoryError:
        raise UsageError(f"payload {str(p)!r} is a folder; pass --payload PATH to a file") from None
    except OSError as exc:
        raise UsageError(f"cannot read {what} {str(p)!r}: {exc.strerror}") from None
    if len(data) > max_bytes:
        if max_bytes == MAX_BODY_BYTES:
            limit = f"{MAX_BODY_BYTES:,} bytes (6 MB), SageMaker's InvokeEndpoint body limit"
        else:
            limit = f"{max_bytes:,} bytes, the most a payload source may hold (it is kept in memory)"
        raise UsageError(f"{what} {str(p)!r} is over {limit}{'; ' + hint if hint else ''}")
    return data


UTF8_BOM = b"\xef\xbb\xbf"


def without_bom(data: bytes) -> bytes:
    """A text file's bytes without the UTF-8 byte-order mark Excel and Notepad put first ("CSV UTF-8"),
    for the readers that parse a file's lines (JSONL, prompts); a body sent verbatim keeps its bytes."""
    return data[len(UTF8_BOM):] if data.startswith(UTF8_BOM) else data


def load_file(path: Path, template: InvocationTemplate) -> list[Invocation]:
    body = read_payload_file(path, template.max_body_bytes or MAX_SOURCE_BYTES, hint=BODY_HINT)
    if not body:
        raise UsageError(f"payload file {str(path)!r} is empty; SageMaker rejects empty bodies")
    return [template.make(body, content_type=guess_content_type(path), where=str(path))]


def folder_files(folder: Path) -> list[Path]:
    """The files a folder source sends: sorted by name, hidden files and sub-folders skipped."""
    return sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))


def load_folder(folder: Path, template: InvocationTemplate) -> list[Invocation]:
    files = folder_files(folder)
    if not files:
        raise UsageError(f"payload folder {str(folder)!r} holds no files; put one request body per file in it")
    out = []
    for path in files:
        body = read_payload_file(path, template.max_body_bytes or MAX_SOURCE_BYTES, hint=BODY_HINT)
        if not body:
            raise UsageError(f"payload file {str(path)!r} (in folder {str(folder)!r}) is empty; "
                             "SageMaker rejects empty bodies")
        out.append(template.make(body, content_type=guess_content_type(path, canonical(NUMPY_RAW)), where=str(path)))
    return out


def folder_weights(folder: Path, weights: Mapping[str, float] | Sequence[float]) -> list[float]:
    """Weights for a folder's files: a {file name: weight} mapping (missing files weigh 1) or a list."""
    if not isinstance(weights, Mapping):
        return list(weights)
    names = [p.name for p in folder_files(folder)]
    unknown = sorted(set(weights) - set(names))
    if unknown:
        raise UsageError(f"weight given for {unknown[0]!r}, which is not a file in {str(folder)!r}; files: "
                         f"{', '.join(names)}")
    return [weights.get(name, 1.0) for name in names]
