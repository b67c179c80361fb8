"""Sweep kinds, and the one registry that names them.

A kind (`realtime`, the default, or `serverless`, ...) decides what a configuration is and what its
test measures; everything else is shared. A file's kind is the kind whose section it has, or its
`kind:` key; two kinds' sections are one message. Each entry of `KINDS` is data: its name, `section`,
other `keys` and the section's `hint`. The registry sits below the kinds and names none of their
code: the kinds' section parsers read it (`schema.py` holds them), and `api.py`, above the kinds,
loads a kind's code for a file of that kind only. Adding a kind: docs/sweep.md, "Adding a sweep kind".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from sm_locust.errors import UsageError
from sm_locust.sweep.validate import Checker
from sm_locust.util.registry import Registry

KIND_KEY = "kind"  # the optional top-level key naming the kind


class Section(Protocol):
    """A kind's parsed section."""

    shared: dict[str, Any]  # settings every configuration gets (`<section>.<key>`: value)

    def grid(self) -> dict[str, list[Any]]:
        """The grid axes it adds (`<section>.<key>`: values), in file order."""
        ...

    def as_dict(self) -> dict[str, Any]:
        """The section as sweep.json records it (under the section's name)."""
        ...


@dataclass(frozen=True)
class SweepKind:
    name: str
    section: str | None = None  # None: the default kind (no section of its own)
    keys: tuple[str, ...] = ()  # its other top-level keys
    hint: str = ""  # what the section holds, for "add a <section>: section (<hint>)"

    def own_keys(self) -> tuple[str, ...]:
        return ((self.section,) if self.section else ()) + self.keys


KINDS: Registry[SweepKind] = Registry("sweep kind")
KINDS.add("realtime", SweepKind("realtime"), "real-time")
KINDS.add("serverless", SweepKind(
    "serverless", section="serverless",
    keys=("tests", "concurrency_multipliers", "compare_instance", "cold_start", "serverless_prices"),
    hint="memory_size_mb, max_concurrency"))
KINDS.add("autoscaling", SweepKind(
    "autoscaling", section="autoscaling", keys=("traffic",), hint="min_instances, max_instances, target_value"))
KINDS.add("async", SweepKind("async", section="async", hint="instance_count, max_concurrent_invocations_per_instance"))
DEFAULT_KIND = "realtime"


def _a(word: str) -> str:
    """'a serverless', 'an autoscaling'."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def kind_keys(kinds: Registry[SweepKind] = KINDS) -> tuple[str, ...]:
    """Every kind's own top-level keys (sections first), for the file's list of valid keys."""
    out: list[str] = []
    for name in kinds:
        out += [k for k in kinds.get(name).own_keys() if k not in out]
    return tuple(out)


def kind_of(data: Mapping[str, Any], check: Checker, kinds: Registry[SweepKind] = KINDS) -> SweepKind:
    """The file's kind: the one whose section it has, or the one `kind:` names (realtime when neither);
    one message for two kinds' sections, a `kind:` that disagrees with the section, an unknown
    `kind:`, or a kind's key without its section."""
    keys = list(data)
    sections = {kinds.get(n).section: kinds.get(n) for n in kinds if kinds.get(n).section in data}
    with_section = [sections[key] for key in keys if key in sections]  # in the file's order
    if len(with_section) > 1:
        names = [str(k.section) for k in with_section]
        raise check.error(", ".join(names), f"a sweep file is one kind; these are the sections of "
                          f"{' and '.join(k.name for k in with_section)} sweeps: split it into one file per kind")
    named = None
    if data.get(KIND_KEY) is not None:
        try:
            named = kinds.get(check.text(KIND_KEY, data[KIND_KEY]))
        except UsageError as exc:
            raise check.prefixed(KIND_KEY, exc) from None
    if with_section:
        kind = with_section[0]
        if named is not None and named.name != kind.name:
            raise check.error(KIND_KEY, f"{named.name}, but the file has {_a(kind.section or '')}: section "
                              f"({_a(kind.name)} sweep); leave kind: out or make it {kind.name}")
    elif named is not None and named.section:
        raise check.error(named.section,
                          f"missing: {_a(named.name)} sweep needs {_a(named.section)}: section ({named.hint})")
    else:
        kind = named or kinds.get(DEFAULT_KIND)
    for name in kinds:
        other = kinds.get(name)
        if other is kind or not other.section:
            continue
        for key in other.keys:
            if key in data and key not in kind.keys:
                raise check.error(key,
                                  f"applies to {other.name} sweeps only; add {_a(other.section)}: section "
                                  f"({other.hint})")
    return kind
