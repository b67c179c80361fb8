"""Invoke args in a pickle file: the SageMaker serverless benchmarking toolkit's `.pkl` format.

The toolkit saves binary bodies (images, audio) with `pickle.dump(invoke_args)`: a list of dicts
such as `{"Body": b"...", "ContentType": "image/jpeg"}`, the same keys as a JSONL line
(`jsonl.py`), with `Body` as bytes. A pickle can name any importable callable and have the loader
call it (`os.system` included), so this reader never runs `pickle.load`: `PlainDataUnpickler`
builds plain data only (dict, list, tuple, set, str, bytes, bytearray, int, float, bool, None) and
refuses every class, global and persistent id, before anything is called. A file that needs one
(a numpy array, a custom class, bytes pickled with protocol 0-2 by Python 3) is a one-line
UsageError with a conversion hint: save plain bytes with protocol 3 or later, or convert to JSONL.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path

from sm_locust.errors import UsageError
from sm_locust.invocation import Invocation
from sm_locust.payloads.files import read_payload_file
from sm_locust.payloads.jsonl import parse_invoke_args
from sm_locust.payloads.template import InvocationTemplate

PICKLE_SUFFIXES = (".pkl", ".pickle")
CONVERT_HINT = ("save the invoke args as plain dicts with bytes bodies (pickle protocol 3 or later), or convert them "
                "to JSONL with base64 bodies (\"BodyEncoding\": \"base64\"; docs/payloads.md)")


class PlainDataUnpickler(pickle.Unpickler):
    """An unpickler for data only: every global (hence every class and every callable a REDUCE,
    NEWOBJ, INST or OBJ opcode could call) and every persistent id is refused."""

    def find_class(self, module: str, name: str) -> object:
        raise pickle.UnpicklingError(f"it names {module}.{name}, and sm-locust unpickles plain data only")

    def persistent_load(self, pid: object) -> object:
        raise pickle.UnpicklingError("it holds a persistent id, and sm-locust unpickles plain data only")


def loads_plain(data: bytes) -> object:
    """Unpickle `data` into plain data; pickle.UnpicklingError (and the parser's own errors) otherwise."""
    return PlainDataUnpickler(io.BytesIO(data)).load()


def load_pickle(path: Path, template: InvocationTemplate) -> tuple[list[Invocation], list[float] | None]:
    """Invocations from a `.pkl` of invoke args (a list of dicts, or one dict), plus weights when any has `Weight`."""
    data = read_payload_file(path)
    try:
        args = loads_plain(data)
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError,
            MemoryError, OverflowError) as exc:
        raise UsageError(f"payload {str(path)!r} is not a plain-data pickle ({exc}); {CONVERT_HINT}") from None
    if isinstance(args, dict):
        args = [args]
    if not isinstance(args, (list, tuple)) or not args:
        kind = "an empty list" if isinstance(args, (list, tuple)) else type(args).__name__
        raise UsageError(f"payload {str(path)!r} holds {kind}, not a list of invoke-args dicts with a \"Body\" key")
    invocations: list[Invocation] = []
    weights: list[float | None] = []
    for index, item in enumerate(args):
        invocation, weight = parse_invoke_args(item, f"{path}[{index}]", template)
        invocations.append(invocation)
        weights.append(weight)
    if all(w is None for w in weights):
        return invocations, None
    return invocations, [1.0 if w is None else float(w) for w in weights]
