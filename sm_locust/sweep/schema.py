"""The sweep file: read it (YAML or JSON), apply `--set` overrides, check its structure.

Every mistake is one `UsageError` naming the file and the key's path (`objective.slo: unknown
key; valid keys: ...`), raised before anything is deployed, worded by the one checker
(`validate.py`). This module checks the structure and the shared top-level keys, finds the file's
kind (`kinds.py`) and has its section checked by the kind's parser; the deployer checks the keys of
`endpoint:`, `grid:` and `configurations:` (which settings exist depends on where the configuration
runs) and `load.py` checks `load:`. docs/sweep.md documents every key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sm_locust.errors import UsageError
from sm_locust.sweep.asynchronous import spec as async_spec
from sm_locust.sweep.autoscaling import spec as autoscaling_spec
from sm_locust.sweep.grid import Configuration, flatten
from sm_locust.sweep.kinds import KIND_KEY, Section, kind_keys, kind_of
from sm_locust.sweep.objective import (
    DEFAULT_MAX_ERROR_RATE,
    OPTIMIZE,
    PERCENTILE_KEYS,
    Objective,
)
from sm_locust.sweep.serverless import spec as serverless_spec
from sm_locust.sweep.validate import Checker, spec_error
from sm_locust.util.yamlsafe import load_yaml, read_text_file

SHARED_KEYS = (
    "name", "sweep_id", "description", "deploy", "endpoint", "grid", "configurations", "load", "objective",
    "price_per_hour", "instance_type", "prices", "max_cost_usd", "max_parallel_endpoints", "region", "aws_profile",
    "report", "expected_deploy_minutes", "deploy_timeout_minutes", "confirm",
)
TOP_LEVEL_KEYS = SHARED_KEYS + (KIND_KEY,) + kind_keys()  # each kind's section and keys (sweep/kinds.py)
# each kind's section parser (`parse_section`) and the shared keys it refuses (`REFUSED`), by kind name
SECTION_PARSERS = {serverless_spec.SECTION: serverless_spec, autoscaling_spec.SECTION: autoscaling_spec,
                   async_spec.SECTION: async_spec}
OBJECTIVE_KEYS = ("target_rps", "slo_ms", "percentile", "max_error_rate", "safety_factor", "optimize",
                  "max_breach_s")  # max_breach_s: autoscaling sweeps only
SWEEP_ID = re.compile(r"^[A-Za-z0-9](-?[A-Za-z0-9])*$")
MAX_SWEEP_ID = 40  # leaves room in SageMaker's 63-character names for a configuration's suffix


@dataclass
class SweepSpec:
    """A checked sweep file. `endpoint` and each configuration are flat settings (dotted keys)."""

    name: str
    sweep_id: str
    deploy: str = "local"
    kind: str = "realtime"  # sweep/kinds.py
    section: Section | None = None  # the kind's own section, parsed (None for realtime)
    endpoint: dict[str, Any] = field(default_factory=dict)
    grid: dict[str, list] = field(default_factory=dict)  # grid: and the kind's section's axes
    configurations: list[dict[str, Any]] = field(default_factory=list)
    load: dict[str, Any] = field(default_factory=dict)
    objective: Objective = field(default_factory=Objective)
    price_per_hour: float | None = None
    instance_type: str | None = None
    prices: str | None = None
    max_cost_usd: float | None = None
    max_parallel_endpoints: int = 1
    region: str | None = None
    aws_profile: str | None = None
    report: bool = True
    confirm: bool = True  # measure the leader and the runner-up once more (sweep/replicates.py)
    expected_deploy_minutes: float | None = None
    deploy_timeout_minutes: float = 60.0
    description: str = ""
    source: str = "<sweep>"  # the file, for messages
    base_dir: Path = field(default_factory=Path.cwd)  # relative paths in the file are relative to it

    @property
    def check(self) -> Checker:
        """The file's checker: messages naming the file and a key's path."""
        return Checker(self.source)

    def error(self, path: str, message: str) -> UsageError:
        return spec_error(self.source, path, message)

    def shared_settings(self) -> dict[str, object]:
        """The settings every configuration starts from: top-level pricing, then `endpoint:`."""
        shared: dict[str, object] = {}
        if self.instance_type is not None:
            shared["instance_type"] = self.instance_type
        if self.price_per_hour is not None:
            shared["price_per_hour"] = self.price_per_hour
        shared.update(self.endpoint)
        return shared

    def where(self, c: Configuration) -> Callable[[str], str]:
        """`where(key)`: the file and path a setting of configuration `c` came from, for the
        deployer's messages (`sweep.yaml: grid.max_concurrency`)."""

        def where(key: str) -> str:
            if not key:
                return f"{self.source}: configuration {c.label!r}"
            if self.section is not None and (key in self.section.grid() or key in self.section.shared):
                return f"{self.source}: {key}"  # `<section>.<key>`: its own path
            if key in self.grid:
                return f"{self.source}: grid.{key}"
            for i, item in enumerate(self.configurations):
                if key in item or key.split(".", 1)[0] in item:
                    return f"{self.source}: configurations[{i}].{key}"
            if key in self.endpoint:
                return f"{self.source}: endpoint.{key}"
            if key in ("instance_type", "price_per_hour") and getattr(self, key) is not None:
                return f"{self.source}: {key}"
            return f"{self.source}: endpoint.{key}"

        return where


def read_file(path: str | Path) -> dict[str, object]:
    """The file's mapping; `.json` is read as JSON, anything else as YAML (which JSON also is), both
    bounded (`sm_locust.util.yamlsafe`: a regular UTF-8 file, its size, aliases, nesting)."""
    p = Path(path)
    text = read_text_file(p, f"sweep file {p}")
    if p.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{p}: not valid JSON: {exc}") from None
        except RecursionError:
            raise UsageError(f"{p}: nests lists or objects too deeply") from None
    else:
        data = load_yaml(text, str(p))
    if not isinstance(data, dict):
        raise UsageError(f"{p}: a sweep file holds a mapping (name:, deploy:, grid:, ...), not {type(data).__name__}")
    return data


def apply_overrides(data: dict[str, object], overrides: list[str], source: str) -> dict[str, object]:
    """`--set load.run_time=3s`: the value is read as YAML (`3`, `true`, `[1, 2]`). The first dotted
    part names a section; inside `grid:` the rest is one (dotted) key, elsewhere a nested path."""
    data = dict(data)
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set {item!r}: expected KEY=VALUE, e.g. --set load.run_time=30s")
        try:
            value = load_yaml(raw, f"--set {key}") if raw.strip() else ""
        except UsageError:  # not YAML (or a bomb): the text as it is
            value = raw
        head, _, rest = key.strip().partition(".")
        if not rest:
            data[head] = value
            continue
        section = data.get(head)
        if section is None:
            section = {}
        if not isinstance(section, dict):
            raise spec_error(source, head, f"--set {key}: {head} is not a mapping")
        section = dict(section)
        data[head] = section
        if head == "grid":
            section[rest] = value
            continue
        parts = rest.split(".")
        for part in parts[:-1]:
            inner = section.get(part)
            inner = dict(inner) if isinstance(inner, dict) else {}
            section[part] = inner
            section = inner
        section[parts[-1]] = value
    return data


def _percentile(check: Checker, value: object) -> float:
    text = str(value).strip().lower().lstrip("p")
    try:
        pct = float(text)
    except ValueError:
        raise check.error("objective.percentile",
                          f"expected a percentile like 95, p99 or 99.9, got {value!r}") from None
    if pct not in PERCENTILE_KEYS:
        raise check.error("objective.percentile", f"{value!r}: runs record p50, p90, p95, p99 and p99.9; choose one")
    return pct


def parse_objective(source: str, value: object) -> Objective:
    check = Checker(source)
    data = check.mapping("objective", value)
    check.unknown("objective", data, OBJECTIVE_KEYS)
    kwargs: dict[str, Any] = {}
    if data.get("target_rps") is not None:
        kwargs["target_rps"] = check.number("objective.target_rps", data["target_rps"], above=0)
    if data.get("slo_ms") is not None:
        kwargs["slo_ms"] = check.number("objective.slo_ms", data["slo_ms"], above=0)
    if data.get("percentile") is not None:
        kwargs["percentile"] = _percentile(check, data["percentile"])
    if data.get("max_error_rate") is not None:
        kwargs["max_error_rate"] = check.number("objective.max_error_rate", data["max_error_rate"], minimum=0,
                                                maximum=1)
    else:
        kwargs["max_error_rate"] = DEFAULT_MAX_ERROR_RATE
    if data.get("safety_factor") is not None:
        kwargs["safety_factor"] = check.number("objective.safety_factor", data["safety_factor"], above=0, maximum=1)
    if data.get("max_breach_s") is not None:
        kwargs["max_breach_s"] = check.number("objective.max_breach_s", data["max_breach_s"], minimum=0)
    if data.get("optimize") is not None:
        optimize = str(data["optimize"]).strip().lower()
        if optimize not in OPTIMIZE:
            raise check.error("objective.optimize",
                              f"unknown {data['optimize']!r}; choose one of: {', '.join(OPTIMIZE)}")
        kwargs["optimize"] = optimize
    return Objective(**kwargs)


def sweep_id_from(name: str) -> str:
    text = re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-")[:MAX_SWEEP_ID].strip("-")
    return text or "sweep"


def parse_spec(data: Mapping[str, object], *, source: str = "<sweep>", base_dir: Path | None = None) -> SweepSpec:
    """Check the structure and top-level values; returns a SweepSpec (settings flattened)."""
    check = Checker(source)
    check.unknown("", data, TOP_LEVEL_KEYS)
    if "name" not in data:
        raise check.error("name", "missing; every sweep has a name (it names the sweep folder and its resources)")
    name = check.text("name", data["name"])
    if data.get("sweep_id") is not None:
        sweep_id = check.text("sweep_id", data["sweep_id"])
        if len(sweep_id) > MAX_SWEEP_ID or not SWEEP_ID.match(sweep_id):
            raise check.error("sweep_id",
                              f"{sweep_id!r}: use letters, digits and single hyphens, at most {MAX_SWEEP_ID} "
                              f"characters")
    else:
        sweep_id = sweep_id_from(name)
    spec = SweepSpec(name=name, sweep_id=sweep_id, source=source, base_dir=base_dir or Path.cwd())
    spec.deploy = check.text("deploy", data.get("deploy", "local")).lower()
    spec.description = str(data.get("description") or "")
    spec.endpoint = flatten(check.mapping("endpoint", data.get("endpoint")))

    grid = check.mapping("grid", data.get("grid"))
    if "grid" in data and not grid:
        raise check.error("grid", "empty: give each setting to vary a list of values, e.g. max_concurrency: [2, 5]")
    for key, values in flatten(grid).items():
        spec.grid[key] = check.axis(f"grid.{key}", values)

    explicit = data.get("configurations")
    if explicit is not None:
        if not isinstance(explicit, list):
            raise check.error("configurations", "expected a list of settings mappings")
        if not explicit:
            raise check.error("configurations", "empty list: give at least one configuration (or leave the key out)")
        for i, item in enumerate(explicit):
            if not check.mapping(f"configurations[{i}]", item):
                raise check.error(f"configurations[{i}]", "empty: give the settings of this configuration")
            spec.configurations.append(dict(item))
    kind = kind_of(data, check)
    spec.kind = kind.name
    section = SECTION_PARSERS.get(kind.name)
    if section is not None:
        for key, why in section.REFUSED.items():
            if data.get(key) is not None:
                raise check.error(key, why)
        spec.section = section.parse_section(data, check, spec.deploy, spec.base_dir)
        for key in spec.grid:  # one home per setting: the section's axes are not repeated in grid:
            if key in spec.section.grid() or key in spec.section.shared:
                raise check.error(f"grid.{key}", f"also set in the {kind.section}: section; set it in one place")
        spec.grid = {**spec.section.grid(), **spec.grid}  # the section's axes first: they label the configurations
        spec.endpoint.update(spec.section.shared)
    if not spec.grid and not spec.configurations:
        raise check.error("grid",
                          "missing: a sweep needs a grid: (settings -> lists of values) or configurations: (a list)")

    spec.load = dict(check.mapping("load", data.get("load")))
    spec.objective = parse_objective(source, data.get("objective"))
    if spec.objective.max_breach_s is not None and spec.kind != "autoscaling":
        raise check.error("objective.max_breach_s", "applies to autoscaling sweeps (seconds over the SLO while the "
                          "fleet scales); leave it out")
    if data.get("price_per_hour") is not None:
        spec.price_per_hour = check.number("price_per_hour", data["price_per_hour"], minimum=0)
    if data.get("instance_type") is not None:
        spec.instance_type = check.text("instance_type", data["instance_type"])
    if data.get("prices") is not None:
        spec.prices = check.file("prices", data["prices"], spec.base_dir)
    if data.get("max_cost_usd") is not None:
        spec.max_cost_usd = check.number("max_cost_usd", data["max_cost_usd"], above=0)
    if data.get("max_parallel_endpoints") is not None:
        spec.max_parallel_endpoints = check.integer("max_parallel_endpoints", data["max_parallel_endpoints"], minimum=1)
    if data.get("region") is not None:
        spec.region = check.text("region", data["region"])
    if data.get("aws_profile") is not None:
        spec.aws_profile = check.text("aws_profile", data["aws_profile"])
    if data.get("report") is not None:
        spec.report = check.flag("report", data["report"])
    if data.get("confirm") is not None:
        spec.confirm = check.flag("confirm", data["confirm"])
    if data.get("expected_deploy_minutes") is not None:
        spec.expected_deploy_minutes = check.number("expected_deploy_minutes", data["expected_deploy_minutes"],
                                                    minimum=0)
    if data.get("deploy_timeout_minutes") is not None:
        spec.deploy_timeout_minutes = check.number("deploy_timeout_minutes", data["deploy_timeout_minutes"], above=0)
    return spec


def load_spec(path: str | Path, overrides: list[str] | None = None) -> SweepSpec:
    p = Path(path)
    data = apply_overrides(read_file(p), list(overrides or []), str(p))
    return parse_spec(data, source=str(p), base_dir=p.resolve().parent)
