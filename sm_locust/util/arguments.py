"""Types of the Python API's arguments: a clear TypeError naming the argument, before anything runs.

Why: the API took `out=b'x'` (and made a folder named `b'x'`), `compare(out=123)`, `sweep(yes='maybe')`
(truthy: the sweep ran without asking), `LocalEndpoint(max_concurrency='x')` and
`RunResult.figures(cloudwatch='yes')`, each failing late, elsewhere or not at all.
"""

from __future__ import annotations

import numbers
import os


def _got(value: object) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"


def require_path(name: str, value: object, *, optional: bool = True) -> None:
    """`value` is a path (str or os.PathLike, not bytes), or None when `optional`."""
    if value is None and optional:
        return
    if isinstance(value, bytes) or not isinstance(value, str | os.PathLike) or not os.fspath(value):
        raise TypeError(f"{name}= must be a path (a str or a pathlib.Path), got {_got(value)}")


def require_bool(name: str, value: object, *, optional: bool = False) -> None:
    """`value` is True or False (None too when `optional`): a string such as 'no' would read as true."""
    if value is None and optional:
        return
    if not isinstance(value, bool):
        raise TypeError(f"{name}= must be True or False{' (or None)' if optional else ''}, got {_got(value)}")


def require_kind(name: str, value: object, annotation: str) -> None:
    """`value` fits a dataclass field's annotation text (`int`, `float`, `str`, `bool`, each `| None`);
    any other annotation is not checked here."""
    parts = {p.strip() for p in str(annotation).split("|")}
    if value is None and "None" in parts:
        return
    kinds = parts - {"None"}
    if len(kinds) != 1 or not kinds <= {"int", "float", "str", "bool"}:
        return
    kind = kinds.pop()
    if kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "str":
        ok = isinstance(value, str)
    elif kind == "int":
        ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    else:
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not ok:
        wanted = {"int": "a whole number", "float": "a number", "str": "a str", "bool": "True or False"}[kind]
        raise TypeError(f"{name}= must be {wanted}{' (or None)' if 'None' in parts else ''}, got {_got(value)}")
