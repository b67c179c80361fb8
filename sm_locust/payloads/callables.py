"""Payloads produced by user code: `module:function` or `path/to/file.py:function`.

The function is called once, with no arguments, before the test. It returns one object or an
iterable (list, generator) of them; at most `CALLABLE_LIMIT` items are taken, so an endless
generator is fine. Each item may be:
- `bytes` / `str`: sent as they are (Content-Type: the override, else the serializer's);
- an `Invocation`: used as it is;
- a dict with a `"Body"` key: invoke args, as on a JSONL line;
- anything else (a ranking dict, an array, a dict of tensors): encoded with the serializer.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import re
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from sm_locust.errors import UsageError
from sm_locust.invocation import Invocation
from sm_locust.payloads.jsonl import parse_invoke_args
from sm_locust.payloads.template import InvocationTemplate
from sm_locust.serializers import SerializationError, Serializer

CALLABLE_LIMIT = 10_000
_SPEC = re.compile(r"^(?P<target>[^:]+):(?P<function>[A-Za-z_][A-Za-z0-9_.]*)$")


def looks_like_callable(source: str) -> bool:
    """True for `module:function` or `file.py:function` (checked only when no such path exists)."""
    return bool(_SPEC.match(source))


def resolve(spec: str) -> Callable[[], object]:
    """Import the function named by `spec`, or a UsageError saying what is missing."""
    match = _SPEC.match(spec)
    if not match:
        raise UsageError(f"payload {spec!r} is neither a file nor module:function / path/to/file.py:function")
    target, name = match["target"], match["function"]
    if target.endswith(".py"):
        path = Path(target)
        if not path.is_file():
            raise UsageError(f"payload module file {target!r} does not exist")
        module_name = "sm_locust_payload_" + re.sub(r"\W", "_", path.stem)
        module_spec = importlib.util.spec_from_file_location(module_name, path)
        if module_spec is None or module_spec.loader is None:
            raise UsageError(f"payload module file {target!r} cannot be imported as Python")
        module = importlib.util.module_from_spec(module_spec)
        try:
            module_spec.loader.exec_module(module)
        except Exception as exc:  # user code: report, do not crash with a traceback
            raise UsageError(f"importing {target!r} failed: {type(exc).__name__}: {exc}") from None
    else:
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as exc:
            raise UsageError(
                f"cannot import module {target!r} ({exc}); use path/to/file.py:{name} or add its folder to PYTHONPATH"
            ) from None
        except Exception as exc:
            raise UsageError(f"importing {target!r} failed: {type(exc).__name__}: {exc}") from None
    obj: object = module
    for part in name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise UsageError(f"{target!r} has no function {name!r}")
    if not callable(obj):
        raise UsageError(f"{spec!r} is not callable")
    return obj


def _items(result: object) -> Iterable[object]:
    single = (bytes, bytearray, memoryview, str, dict, np.ndarray, Invocation)
    if isinstance(result, single) or not isinstance(result, Iterable):
        return [result]
    return result


def load_callable(
    spec: str, template: InvocationTemplate, serializer: Serializer
) -> tuple[list[Invocation], list[float] | None]:
    """Invocations from the function's items, plus weights when any invoke-args item has `Weight`."""
    function = resolve(spec)
    try:
        items = list(itertools.islice(_items(function()), CALLABLE_LIMIT))
    except UsageError:
        raise
    except Exception as exc:  # user code
        raise UsageError(f"payload function {spec} raised {type(exc).__name__}: {exc}") from None
    out: list[Invocation] = []
    weights: list[float | None] = []
    for i, item in enumerate(items, start=1):
        where = f"{spec} item {i}"
        if isinstance(item, Invocation):
            if not item.body:
                raise UsageError(f"{where}: the body is empty; SageMaker rejects empty bodies")
            out.append(item)
        elif isinstance(item, dict) and "Body" in item:
            invocation, weight = parse_invoke_args(item, where, template)
            out.append(invocation)
            weights.append(weight)
            continue
        elif isinstance(item, (bytes, bytearray, memoryview, str)):
            body = item.encode("utf-8") if isinstance(item, str) else bytes(item)
            out.append(template.make(body, content_type=serializer.content_type_of(body), where=where))
        else:
            try:
                out.append(template.encode(item, serializer, where=where))
            except SerializationError as exc:
                raise UsageError(f"{where}: cannot encode with serializer {serializer.name!r}: {exc}") from None
        weights.append(None)
    if all(w is None for w in weights):
        return out, None
    return out, [1.0 if w is None else float(w) for w in weights]
