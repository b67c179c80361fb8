"""How a sweep file's values are judged and worded: the one checker every section and kind uses.

Each section's parser says *what* is valid (`schema.py` the shared keys, each kind's `spec.py` its
own section, `load.py` the `load:` section); this module says *how* a value is checked and what
the message says, so one mistake gets one message wherever it is made. A message is one line
naming the file and the key's path, raised as `UsageError` (exit 2) before anything is deployed:

    sweep.yaml: objective.slo_ms: must be more than 0, got -5

The rules:
- **numbers** (the one rule for every numeric input, `sm_locust.util.numbers`, the same wording as the
  command line's): a real number, not a bool or text; finite (YAML's `.nan` and `.inf` are refused);
  whole when `integer` is asked; within the bounds given (`minimum` and `maximum` inclusive, `above`
  exclusive);
- **mappings**: `key: value` lines with text keys; an empty section (`objective:`) is an empty mapping;
- **unknown keys**: the first one named with its path, the valid ones listed;
- **text**, **true/false**, **one value or a list** (a grid axis or a single value), **a list of
  values** (a `grid:` axis: numbers or text, at least one), **file names** (relative to the sweep file).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sm_locust.errors import UsageError
from sm_locust.util.numbers import number_problem


def spec_error(source: str, path: str, message: str) -> UsageError:
    """`<file>: <key path>: <message>` (without a path: `<file>: <message>`)."""
    return UsageError(f"{source}: {path}: {message}" if path else f"{source}: {message}")


class Checker:
    """The checks of one sweep file (`source` names it in every message)."""

    def __init__(self, source: str = "<sweep>"):
        self.source = source

    def error(self, path: str, message: str) -> UsageError:
        return spec_error(self.source, path, message)

    def unknown(self, path: str, mapping: Mapping[str, object], valid: Iterable[str]) -> None:
        """The first key of `mapping` not in `valid`, named with its path and the valid keys listed."""
        valid = tuple(valid)
        for key in mapping:
            if key not in valid:
                where = f"{path}.{key}" if path else str(key)
                raise self.error(where, f"unknown key; valid keys: {', '.join(valid)}")

    def mapping(self, path: str, value: object) -> dict[str, object]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error(path, f"expected a mapping (key: value lines), got {type(value).__name__}")
        for key in value:
            if not isinstance(key, str):
                raise self.error(f"{path}.{key}", "keys must be text")
        return value

    def number(self, path: str, value: object, *, minimum: float | None = None, above: float | None = None,
               maximum: float | None = None, expected: str | None = None) -> float:
        """A finite number within the bounds; `expected` replaces the wording of every failure
        (`"<expected>, got <value>"`) where a key needs its own explanation."""
        return float(self._checked(path, value, minimum, above, maximum, False, expected))

    def integer(self, path: str, value: object, *, minimum: float | None = None, maximum: float | None = None,
                expected: str | None = None) -> int:
        """A whole number (2 or 2.0) within the bounds."""
        return int(self._checked(path, value, minimum, None, maximum, True, expected))

    def _checked(self, path: str, value: object, minimum: float | None, above: float | None, maximum: float | None,
                 whole: bool, expected: str | None) -> float:
        number, problem = number_problem(value, int if whole else float, minimum=minimum, above=above,
                                         maximum=maximum, text=False)  # the one rule (sm_locust/util/numbers.py)
        if problem is not None:
            raise self.error(path, f"{expected}, got {value!r}" if expected else problem)
        assert number is not None
        return number

    def text(self, path: str, value: object) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.error(path, f"expected text, got {value!r}")
        return value.strip()

    def flag(self, path: str, value: object) -> bool:
        if not isinstance(value, bool):
            raise self.error(path, f"expected true or false, got {value!r}")
        return value

    def values(self, path: str, value: object) -> list[Any]:
        """One value or a list of them (a kind's grid axis): the list, at least one value."""
        values = value if isinstance(value, list) else [value]
        if not values:
            raise self.error(path, "empty list: give at least one value")
        return values

    def axis(self, path: str, value: object) -> list[object]:
        """A `grid:` axis: a list of numbers or text, at least one."""
        if not isinstance(value, list):
            raise self.error(path, f"expected a list of values, e.g. [{value!r}], got {type(value).__name__}")
        if not value:
            raise self.error(path, "empty list: give at least one value")
        for item in value:
            if isinstance(item, (dict, list)):
                raise self.error(path, f"values are numbers or text, got {item!r}")
        return list(value)

    def file(self, path: str, value: object, base_dir: Path) -> str:
        """A file name; a relative one is relative to the sweep file's folder (`base_dir`)."""
        if not isinstance(value, str) or not value.strip():
            raise self.error(path, f"expected a file name, got {value!r}")
        name = Path(value.strip()).expanduser()
        return str(name if name.is_absolute() else base_dir / name)

    def prefixed(self, path: str, exc: UsageError) -> UsageError:
        """Another checker's message (a registry's, `load_prices`'s) placed under `path`."""
        return self.error(path, exc.message)
