"""Payload sources: turn what the user points `--payload` at into a pool of prepared invocations.

Every body is encoded once, before the test starts; the request path only picks the next
`Invocation` from the pool (`PayloadPool.next()`). `load_payloads(source)` dispatches on the
source:

| source | read by | bodies |
|---|---|---|
| a folder | `files.load_folder` | one per file (sorted; Content-Type from the extension) |
| `*.jsonl` | `jsonl.load_jsonl` | one per line, sm-serverless-benchmarking invoke args |
| `*.pkl` / `*.pickle` | `pickles.load_pickle` | the same invoke args pickled (plain data only, never code) |
| `*.npy` / `*.npz` | `arrays.load_arrays` | `batch_size` rows per body, encoded by a serializer |
| `module:function`, `file.py:function` | `callables.load_callable` | what the function returns/yields |
| any other file | `files.load_file` | the file, verbatim |

Selection (`selection=`): `round-robin` (default), `random` (seeded), `weighted` (JSONL `Weight`
keys or `weights=`; chosen automatically when weights exist). With `split=K` every body also
carries its rows pre-encoded as K parts (`split.py`; sent by `sm_locust.users.fanout`). The command-line options and the
wiring from them to this function live in `payloads/options.py`. See docs/payloads.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from sm_locust.aws.runtime_api import MAX_BODY_BYTES
from sm_locust.errors import UsageError
from sm_locust.payloads.arrays import DEFAULT_MAX_BODIES, load_arrays
from sm_locust.payloads.callables import (
    CALLABLE_LIMIT,
    load_callable,
    looks_like_callable,
)
from sm_locust.payloads.files import (
    folder_weights,
    guess_content_type,
    load_file,
    load_folder,
    read_payload_file,
)
from sm_locust.payloads.jsonl import load_jsonl
from sm_locust.payloads.pickles import PICKLE_SUFFIXES, load_pickle
from sm_locust.payloads.pool import SELECTIONS, PayloadPool
from sm_locust.payloads.split import check_split, split_invocations
from sm_locust.payloads.template import InvocationTemplate
from sm_locust.serializers import Serializer, create_serializer

DEFAULT_SERIALIZER = "json"


def _serializer(serializer: str | Serializer | None, options: Mapping[str, object] | None) -> Serializer:
    if isinstance(serializer, Serializer):
        return serializer
    return create_serializer(serializer or DEFAULT_SERIALIZER, **dict(options or {}))


def encoded_by_serializer(source: str | Path) -> bool:
    """True when the serializer builds the bodies of `source` (.npy/.npz arrays, module:function);
    False for sources sent as they are (a file, a folder, invoke args in .jsonl / .pkl)."""
    path = Path(source)
    if not path.exists():
        return looks_like_callable(str(source))
    return path.is_file() and path.suffix.lower() in (".npy", ".npz")


def load_payloads(
    source: str | Path,
    *,
    content_type: str | None = None,
    accept: str | None = None,
    serializer: str | Serializer | None = None,
    serializer_options: Mapping[str, object] | None = None,
    selection: str | None = None,
    weights: Sequence[float] | Mapping[str, float] | None = None,
    seed: int | None = None,
    batch_size: int = 1,
    max_bodies: int = DEFAULT_MAX_BODIES,
    base64: bool = False,
    split: int = 1,
    max_body_bytes: int | None = MAX_BODY_BYTES,
    **headers: str | None,
) -> PayloadPool:
    """Build the pool for `--payload SOURCE`.

    - `content_type`: override for every body (None: per source, see the table in docs/payloads.md);
    - `accept` and `**headers` (`custom_attributes`, `target_model`, `target_variant`,
      `inference_component`, ...): defaults for every invocation; a JSONL line's own keys win;
    - `serializer` (+ `serializer_options`): encodes array and callable sources (default json);
    - `selection`, `weights` (a list in payload order, or {file name: weight} for a folder), `seed`;
    - `batch_size`, `max_bodies`: rows per body and distinct bodies for `.npy`/`.npz` sources;
    - `base64`: every JSONL `Body` is base64 (same as `"BodyEncoding": "base64"` on each line);
    - `split`: K > 1 pre-encodes each body's rows as K parts too (`split.py`, `--split K`);
    - `max_body_bytes`: a body over it is refused before the test (default SageMaker's 6 MB; None when
      no body is sent: InvokeEndpointAsync reads its input from S3). Sources are read with a size cap
      and must be regular files (`files.read_payload_file`).
    """
    split = check_split(split)
    template = InvocationTemplate(content_type, accept, dict(headers), keep_source=split > 1,
                                  max_body_bytes=max_body_bytes)
    text = str(source)
    path = Path(source)
    found_weights: Sequence[float] | None = None
    if not path.exists() and looks_like_callable(text):
        invocations, found_weights = load_callable(text, template, _serializer(serializer, serializer_options))
    elif path.is_dir():
        invocations = load_folder(path, template)
        if isinstance(weights, Mapping):
            weights = folder_weights(path, weights)
    elif path.suffix.lower() == ".jsonl":
        invocations, found_weights = load_jsonl(path, template, force_base64=base64)
    elif path.suffix.lower() in PICKLE_SUFFIXES:
        invocations, found_weights = load_pickle(path, template)
    elif path.suffix.lower() in (".npy", ".npz"):
        ser = _serializer(serializer, serializer_options)
        invocations = load_arrays(path, template, ser, batch_size, max_bodies, seed)
    else:
        invocations = load_file(path, template)
    if isinstance(weights, Mapping):
        raise UsageError("weights by file name only apply to a folder source; give a list in payload order")
    chosen = weights if weights is not None else found_weights
    if chosen is not None and selection is not None and SELECTIONS.canonical(selection) != "weighted":
        chosen = None  # weights present in the source, but the user asked for another mode
    if split > 1:
        invocations = split_invocations(invocations, split, text)
    return PayloadPool(invocations, text, selection=selection, weights=chosen, seed=seed)


__all__ = [
    "CALLABLE_LIMIT",
    "DEFAULT_MAX_BODIES",
    "SELECTIONS",
    "InvocationTemplate",
    "PayloadPool",
    "encoded_by_serializer",
    "guess_content_type",
    "load_payloads",
    "read_payload_file",
]
