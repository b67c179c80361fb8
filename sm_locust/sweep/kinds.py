"""Sweep kinds, and the one registry that names them.

A kind (`realtime`, the default, or `serverless`, ...) decides what a configuration is and what its
test measures; everything else is shared. A file's kind is the kind whose section it has, or its
`kind:` key; two kinds' sections are one message. Each entry of `KINDS` names its `section`, other
`keys`, `spec` (the module that parses the section), `loader` ("module:function") and optional
`cleanup`. Code is named by string and imported only for a file of that kind, so the registry never
imports the kinds and a `realtime` sweep never imports another kind's code. Adding a kind:
docs/sweep.md, "Adding a sweep kind".
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
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


SectionParser = Callable[[Mapping[str, Any], Checker, str, Path], Section]


@dataclass(frozen=True)
class SweepKind:
    name: str
    loader: str  # "module:function(spec, *, out, client, poll_s) -> Sweep"
    section: str | None = None  # None: the default kind (no section of its own)
    keys: tuple[str, ...] = ()  # its other top-level keys
    hint: str = ""  # what the section holds, for "add a <section>: section (<hint>)"
    spec: str | None = None  # the module with `parse_section` (a SectionParser) and `REFUSED`
    # what `sm-locust sweep --cleanup ID SWEEP` does for this kind, when more than its deployer's cleanup:
    # "module:function(sweep_id, *, deploy, region, profile, client, out_dir, progress) -> (deleted, left)"
    cleanup: str | None = None

    def own_keys(self) -> tuple[str, ...]:
        return ((self.section,) if self.section else ()) + self.keys

    @property
    def parse(self) -> SectionParser | None:
        """The section's parser (None: a kind without a section)."""
        return _resolve(f"{self.spec}:parse_section") if self.spec else None

    @property
    def refused(self) -> Mapping[str, str]:
        """Shared top-level keys this kind refuses -> why."""
        return getattr(importlib.import_module(self.spec), "REFUSED", {}) if self.spec else {}

    def load(self) -> Callable[..., Any]:
        """The loader: `load(spec, *, out, client, poll_s) -> Sweep`."""
        return _resolve(self.loader)

    def cleaner(self) -> Callable[..., tuple[list[str], list[str]]] | None:
        return _resolve(self.cleanup) if self.cleanup else None


def _resolve(target: str) -> Callable[..., Any]:
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function)


KINDS: Registry[SweepKind] = Registry("sweep kind")
KINDS.add("realtime", SweepKind("realtime", "sm_locust.sweep.realtime.sweep:load"), "real-time")
KINDS.add("serverless", SweepKind(
    "serverless", "sm_locust.sweep.serverless.sweep:load", section="serverless",
    keys=("tests", "concurrency_multipliers", "compare_instance", "cold_start", "serverless_prices"),
    hint="memory_size_mb, max_concurrency", spec="sm_locust.sweep.serverless.spec"))
KINDS.add("autoscaling", SweepKind(
    "autoscaling", "sm_locust.sweep.autoscaling.sweep:load", section="autoscaling", keys=("traffic",),
    hint="min_instances, max_instances, target_value", spec="sm_locust.sweep.autoscaling.spec",
    cleanup="sm_locust.sweep.autoscaling.sagemaker:cleanup"))
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
