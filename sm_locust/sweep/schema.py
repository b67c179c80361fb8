"""The sweep file: read it (YAML or JSON), apply `--set` overrides, check its structure.

Every mistake is one `UsageError` naming the file and the key's path (`objective.slo: unknown
key; valid keys: ...`), raised before anything is deployed. This module checks the structure and
the top-level values; the deployer checks the keys of `endpoint:`, `grid:` and `configurations:`
(which settings exist depends on where the configuration runs) and `load.py` checks `load:`.
docs/sweep.md documents every key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sm_locust.errors import UsageError
from sm_locust.sweep.grid import flatten
from sm_locust.sweep.objective import (
    DEFAULT_MAX_ERROR_RATE,
    OPTIMIZE,
    PERCENTILE_KEYS,
    Objective,
)
from sm_locust.sweep.serverless_spec import TOP_LEVEL_KEYS as SERVERLESS_KEYS
from sm_locust.sweep.serverless_spec import parse_serverless

TOP_LEVEL_KEYS = (
    "name", "sweep_id", "description", "deploy", "endpoint", "grid", "configurations", "load", "objective",
    "price_per_hour", "instance_type", "prices", "max_cost_usd", "max_parallel_endpoints", "region", "aws_profile",
    "report", "expected_deploy_minutes", "deploy_timeout_minutes",
) + SERVERLESS_KEYS  # serverless sweeps (issue 14, sweep/serverless_spec.py)
OBJECTIVE_KEYS = ("target_rps", "slo_ms", "percentile", "max_error_rate", "safety_factor", "optimize")
SWEEP_ID = re.compile(r"^[A-Za-z0-9](-?[A-Za-z0-9])*$")
MAX_SWEEP_ID = 40  # leaves room in SageMaker's 63-character names for a configuration's suffix


@dataclass
class SweepSpec:
    """A checked sweep file. `endpoint` and each configuration are flat settings (dotted keys)."""

    name: str
    sweep_id: str
    deploy: str = "local"
    endpoint: dict[str, Any] = field(default_factory=dict)
    grid: dict[str, list] = field(default_factory=dict)
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
    serverless: Any = None  # a serverless sweep's ServerlessSpec (sweep/serverless_spec.py), else None
    expected_deploy_minutes: float | None = None
    deploy_timeout_minutes: float = 60.0
    description: str = ""
    source: str = "<sweep>"  # the file, for messages
    base_dir: Path = field(default_factory=Path.cwd)  # relative paths in the file are relative to it

    def error(self, path: str, message: str) -> UsageError:
        return spec_error(self.source, path, message)

    def shared_settings(self) -> dict[str, Any]:
        """The settings every configuration starts from: top-level pricing, then `endpoint:`."""
        shared: dict[str, Any] = {}
        if self.instance_type is not None:
            shared["instance_type"] = self.instance_type
        if self.price_per_hour is not None:
            shared["price_per_hour"] = self.price_per_hour
        shared.update(self.endpoint)
        return shared


def spec_error(source: str, path: str, message: str) -> UsageError:
    return UsageError(f"{source}: {path}: {message}" if path else f"{source}: {message}")


def read_file(path: str | Path) -> dict[str, Any]:
    """The file's mapping; `.json` is read as JSON, anything else as YAML (which JSON also is)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"sweep file {p} does not exist") from None
    except OSError as exc:
        raise UsageError(f"cannot read sweep file {p}: {exc.strerror or exc}") from None
    if p.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{p}: not valid JSON: {exc}") from None
    else:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise UsageError(f"{p}: not valid YAML{where}: {problem}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{p}: a sweep file holds a mapping (name:, deploy:, grid:, ...), not {type(data).__name__}")
    return data


def apply_overrides(data: dict[str, Any], overrides: list[str], source: str) -> dict[str, Any]:
    """`--set load.run_time=3s`: the value is read as YAML (`3`, `true`, `[1, 2]`). The first dotted
    part names a section; inside `grid:` the rest is one (dotted) key, elsewhere a nested path."""
    data = dict(data)
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set {item!r}: expected KEY=VALUE, e.g. --set load.run_time=30s")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
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


def _unknown(source: str, path: str, mapping: Mapping[str, Any], valid: tuple[str, ...]) -> None:
    for key in mapping:
        if key not in valid:
            where = f"{path}.{key}" if path else str(key)
            raise spec_error(source, where, f"unknown key; valid keys: {', '.join(valid)}")


def _mapping(source: str, path: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise spec_error(source, path, f"expected a mapping (key: value lines), got {type(value).__name__}")
    for key in value:
        if not isinstance(key, str):
            raise spec_error(source, f"{path}.{key}", "keys must be text")
    return value


def _number(source: str, path: str, value: Any, *, minimum: float | None = None, above: float | None = None,
            maximum: float | None = None, whole: bool = False) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise spec_error(source, path, f"expected a number, got {value!r}")
    if whole and not float(value).is_integer():
        raise spec_error(source, path, f"expected a whole number, got {value!r}")
    if minimum is not None and value < minimum:
        raise spec_error(source, path, f"must be at least {minimum:g}, got {value!r}")
    if above is not None and value <= above:
        raise spec_error(source, path, f"must be more than {above:g}, got {value!r}")
    if maximum is not None and value > maximum:
        raise spec_error(source, path, f"must be at most {maximum:g}, got {value!r}")
    return int(value) if whole else float(value)


def _text(source: str, path: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise spec_error(source, path, f"expected text, got {value!r}")
    return value.strip()


def _percentile(source: str, value: Any) -> float:
    text = str(value).strip().lower().lstrip("p")
    try:
        pct = float(text)
    except ValueError:
        raise spec_error(source, "objective.percentile", f"expected a percentile like 95, p99 or 99.9, got {value!r}") from None
    if pct not in PERCENTILE_KEYS:
        raise spec_error(source, "objective.percentile", f"{value!r}: runs record p50, p90, p95, p99 and p99.9; choose one")
    return pct


def parse_objective(source: str, value: Any) -> Objective:
    data = _mapping(source, "objective", value)
    _unknown(source, "objective", data, OBJECTIVE_KEYS)
    kwargs: dict[str, Any] = {}
    if data.get("target_rps") is not None:
        kwargs["target_rps"] = _number(source, "objective.target_rps", data["target_rps"], above=0)
    if data.get("slo_ms") is not None:
        kwargs["slo_ms"] = _number(source, "objective.slo_ms", data["slo_ms"], above=0)
    if data.get("percentile") is not None:
        kwargs["percentile"] = _percentile(source, data["percentile"])
    if data.get("max_error_rate") is not None:
        kwargs["max_error_rate"] = _number(source, "objective.max_error_rate", data["max_error_rate"], minimum=0, maximum=1)
    else:
        kwargs["max_error_rate"] = DEFAULT_MAX_ERROR_RATE
    if data.get("safety_factor") is not None:
        kwargs["safety_factor"] = _number(source, "objective.safety_factor", data["safety_factor"], above=0, maximum=1)
    if data.get("optimize") is not None:
        optimize = str(data["optimize"]).strip().lower()
        if optimize not in OPTIMIZE:
            raise spec_error(source, "objective.optimize", f"unknown {data['optimize']!r}; choose one of: {', '.join(OPTIMIZE)}")
        kwargs["optimize"] = optimize
    return Objective(**kwargs)


def sweep_id_from(name: str) -> str:
    text = re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-")[:MAX_SWEEP_ID].strip("-")
    return text or "sweep"


def parse_spec(data: Mapping[str, Any], *, source: str = "<sweep>", base_dir: Path | None = None) -> SweepSpec:
    """Check the structure and top-level values; returns a SweepSpec (settings flattened)."""
    _unknown(source, "", data, TOP_LEVEL_KEYS)
    if "name" not in data:
        raise spec_error(source, "name", "missing; every sweep has a name (it names the sweep folder and its resources)")
    name = _text(source, "name", data["name"])
    if data.get("sweep_id") is not None:
        sweep_id = _text(source, "sweep_id", data["sweep_id"])
        if len(sweep_id) > MAX_SWEEP_ID or not SWEEP_ID.match(sweep_id):
            raise spec_error(source, "sweep_id", f"{sweep_id!r}: use letters, digits and single hyphens, at most {MAX_SWEEP_ID} characters")
    else:
        sweep_id = sweep_id_from(name)
    spec = SweepSpec(name=name, sweep_id=sweep_id, source=source, base_dir=base_dir or Path.cwd())
    spec.deploy = _text(source, "deploy", data.get("deploy", "local")).lower()
    spec.description = str(data.get("description") or "")
    spec.endpoint = flatten(_mapping(source, "endpoint", data.get("endpoint")))

    grid = _mapping(source, "grid", data.get("grid"))
    if "grid" in data and not grid:
        raise spec_error(source, "grid", "empty: give each setting to vary a list of values, e.g. max_concurrency: [2, 5]")
    for key, values in flatten(grid).items():
        if not isinstance(values, list):
            raise spec_error(source, f"grid.{key}", f"expected a list of values, e.g. [{values!r}], got {type(values).__name__}")
        if not values:
            raise spec_error(source, f"grid.{key}", "empty list: give at least one value")
        for value in values:
            if isinstance(value, (dict, list)):
                raise spec_error(source, f"grid.{key}", f"values are numbers or text, got {value!r}")
        spec.grid[key] = list(values)

    explicit = data.get("configurations")
    if explicit is not None:
        if not isinstance(explicit, list):
            raise spec_error(source, "configurations", "expected a list of settings mappings")
        if not explicit:
            raise spec_error(source, "configurations", "empty list: give at least one configuration (or leave the key out)")
        for i, item in enumerate(explicit):
            _mapping(source, f"configurations[{i}]", item)
            if not item:
                raise spec_error(source, f"configurations[{i}]", "empty: give the settings of this configuration")
            spec.configurations.append(dict(item))
    spec.serverless = parse_serverless(data, source=source, deploy=spec.deploy, base_dir=spec.base_dir)
    if spec.serverless is not None:  # its memory sizes x MaxConcurrency values are the grid (sweep/serverless.py)
        spec.grid = {**spec.serverless.grid(), **spec.grid}
        spec.endpoint.update(spec.serverless.shared)
    if not spec.grid and not spec.configurations:
        raise spec_error(source, "grid", "missing: a sweep needs a grid: (settings -> lists of values) or configurations: (a list)")

    spec.load = dict(_mapping(source, "load", data.get("load")))
    spec.objective = parse_objective(source, data.get("objective"))
    if data.get("price_per_hour") is not None:
        spec.price_per_hour = _number(source, "price_per_hour", data["price_per_hour"], minimum=0)
    if data.get("instance_type") is not None:
        spec.instance_type = _text(source, "instance_type", data["instance_type"])
    if data.get("prices") is not None:
        prices = Path(_text(source, "prices", data["prices"])).expanduser()
        spec.prices = str(prices if prices.is_absolute() else spec.base_dir / prices)
    if data.get("max_cost_usd") is not None:
        spec.max_cost_usd = _number(source, "max_cost_usd", data["max_cost_usd"], above=0)
    if data.get("max_parallel_endpoints") is not None:
        spec.max_parallel_endpoints = _number(source, "max_parallel_endpoints", data["max_parallel_endpoints"], minimum=1, whole=True)
    if data.get("region") is not None:
        spec.region = _text(source, "region", data["region"])
    if data.get("aws_profile") is not None:
        spec.aws_profile = _text(source, "aws_profile", data["aws_profile"])
    if data.get("report") is not None:
        if not isinstance(data["report"], bool):
            raise spec_error(source, "report", f"expected true or false, got {data['report']!r}")
        spec.report = data["report"]
    if data.get("expected_deploy_minutes") is not None:
        spec.expected_deploy_minutes = _number(source, "expected_deploy_minutes", data["expected_deploy_minutes"], minimum=0)
    if data.get("deploy_timeout_minutes") is not None:
        spec.deploy_timeout_minutes = _number(source, "deploy_timeout_minutes", data["deploy_timeout_minutes"], above=0)
    return spec


def load_spec(path: str | Path, overrides: list[str] | None = None) -> SweepSpec:
    p = Path(path)
    data = apply_overrides(read_file(p), list(overrides or []), str(p))
    return parse_spec(data, source=str(p), base_dir=p.resolve().parent)
