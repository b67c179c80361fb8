"""Grid and explicit list -> the configurations of a sweep (pure).

Settings are flat dicts with dotted keys (`environment.SAGEMAKER_MODEL_SERVER_WORKERS`), so a grid
key, a shared `endpoint:` setting and an explicit configuration's nested `environment:` all mean
the same thing. Every combination of the grid's values is one configuration (in file order, the
last key varying fastest); `configurations:` adds explicit ones after the grid's; identical
settings are kept once. A configuration's label names what varies between configurations
(`max_concurrency 5`), and its key is a hash of everything that decides its result, so a rerun
finds the run folder of a configuration it already measured.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sm_locust.errors import UsageError

LABEL_KEY = "name"  # an explicit configuration may name itself
MAX_CONFIGURATIONS = 1_000  # each is a load test of its own; a 1000 x 1000 grid never finished its --plan


@dataclass(frozen=True)
class Configuration:
    index: int  # 1-based, in sweep order
    settings: dict[str, Any]  # shared settings overlaid with this configuration's, flat
    varying: dict[str, Any]  # the settings that differ between the sweep's configurations
    label: str

    def slug(self, key: str) -> str:
        """The run folder's name: what varies, then the key (stable across reorderings)."""
        text = "_".join(f"{short_key(k)}-{_text(v)}" for k, v in self.varying.items()) or self.label
        text = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._")[:60] or "config"
        return f"{text}-{key[:6]}"


def flatten(mapping: Mapping[str, object], prefix: str = "") -> dict[str, object]:
    """{'environment': {'A': 1}} -> {'environment.A': 1}."""
    out: dict[str, object] = {}
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def short_key(key: str) -> str:
    """`environment.SAGEMAKER_MODEL_SERVER_WORKERS` -> `SAGEMAKER_MODEL_SERVER_WORKERS`."""
    return key.rsplit(".", 1)[-1]


def _text(value: object) -> str:
    """A value as the sweep file spells it (YAML's `true`, `null`), not as Python prints it."""
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def label_for(varying: Mapping[str, object]) -> str:
    return ", ".join(f"{short_key(k)} {_text(v)}" for k, v in varying.items())


def expand(shared: Mapping[str, object], grid: Mapping[str, Sequence[object]],
           explicit: Sequence[Mapping[str, object]] = ()) -> list[Configuration]:
    """Every combination of the grid, then the explicit configurations, each over `shared`; a one-line
    UsageError, before anything is expanded, when they would be more than `MAX_CONFIGURATIONS`."""
    combinations = math.prod(len(values) for values in grid.values()) if grid else 0
    if combinations + len(explicit) > MAX_CONFIGURATIONS:
        sizes = " x ".join(f"{len(v):,}" for v in grid.values())
        raise UsageError(f"the sweep has {combinations + len(explicit):,} configurations (grid {sizes or '-'}, "
                         f"{len(explicit):,} listed); a sweep runs at most {MAX_CONFIGURATIONS:,}: split it")
    rows: list[tuple[dict[str, object], str | None]] = []
    if grid:
        keys = list(grid)
        for values in itertools.product(*(grid[k] for k in keys)):
            rows.append((dict(zip(keys, values, strict=True)), None))
    for item in explicit:
        item = dict(item)
        name = item.pop(LABEL_KEY, None)
        rows.append((flatten(item), None if name is None else str(name)))
    merged: list[tuple[dict[str, object], dict[str, object], str | None]] = []
    seen: set[str] = set()
    for own, name in rows:
        settings = {**shared, **own}
        fingerprint = canonical(settings)
        if fingerprint in seen:
            continue
        seen.add(fingerprint)
        merged.append((settings, own, name))
    varying_keys = _varying_keys([s for s, _, _ in merged], [o for _, o, _ in merged])
    configurations = []
    for i, (settings, _, name) in enumerate(merged, start=1):
        varying = {k: settings.get(k) for k in varying_keys if k in settings}
        label = name or label_for(varying) or f"configuration {i}"
        configurations.append(Configuration(i, settings, varying, label))
    return configurations


def _varying_keys(all_settings: list[dict[str, object]], owns: list[dict[str, object]]) -> list[str]:
    """Keys whose value differs between configurations, in first-seen order; with one
    configuration, the keys it set itself."""
    order: list[str] = []
    for own in owns:
        for k in own:
            if k not in order:
                order.append(k)
    if len(all_settings) <= 1:
        return order
    return [k for k in order if len({canonical({"v": s.get(k)}) for s in all_settings}) > 1]


def canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def configuration_key(*parts: object) -> str:
    """A short stable hash of everything that decides a configuration's result."""
    return hashlib.sha1(canonical(list(parts)).encode()).hexdigest()[:12]
