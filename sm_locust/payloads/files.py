"""Payloads read from files: one file sent verbatim, or every file of a folder.

A body's Content-Type comes from the user's override, else from the file extension
(`EXTENSION_TYPES`, whose formats are the serializers' Content-Type table, then the system MIME
table), else application/json for a single file and application/octet-stream in a folder.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Mapping, Sequence
from pathlib import Path

from sm_locust.errors import UsageError
from sm_locust.invocation import Invocation
from sm_locust.payloads.template import InvocationTemplate
from sm_locust.serializers.content_types import CSV, JSON, JSON_LINES, NPY, NUMPY_RAW, PROTOBUF, canonical

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


def read_payload_file(path: str | Path) -> bytes:
    """The bytes of a payload file, or a one-line UsageError saying why it cannot be read."""
    p = Path(path)
    try:
        return p.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"payload file {str(p)!r} does not exist; pass --payload PATH to a readable file") from None
    except IsADirectoryError:
        raise UsageError(f"payload {str(p)!r} is a folder; pass --payload PATH to a file") from None
    except OSError as exc:
        raise UsageError(f"cannot read payload file {str(p)!r}: {exc.strerror}") from None


def load_file(path: Path, template: InvocationTemplate) -> list[Invocation]:
    body = read_payload_file(path)
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
        body = read_payload_file(path)
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
