"""A small named registry used for every pluggable part (serializers, shapes, metric sources).

Pluggable parts are looked up by the names users type on the command line. A plain dict would
answer an unknown name with a bare KeyError; `Registry.get` answers with `UnknownNameError`, which
lists the valid names so the user can fix the typo in one go.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from sm_locust.errors import UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names (and aliases) to implementations of one kind of part."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}
        self._aliases: dict[str, str] = {}

    def register(self, name: str, *aliases: str) -> Callable[[T], T]:
        """Decorator: register `obj` under `name` and any aliases."""

        def decorator(obj: T) -> T:
            self.add(name, obj, *aliases)
            return obj

        return decorator

    def add(self, name: str, obj: T, *aliases: str) -> None:
        key = name.lower()
        if key in self._items or key in self._aliases:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._items[key] = obj
        for alias in aliases:
            self._aliases[alias.lower()] = key

    def canonical(self, name: str) -> str:
        key = name.lower()
        key = self._aliases.get(key, key)
        if key not in self._items:
            raise UnknownNameError(self.kind, name, self._items)
        return key

    def get(self, name: str) -> T:
        return self._items[self.canonical(name)]

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name.lower() in self._items or name.lower() in self._aliases)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
