"""The serverless keys of a sweep file, checked (issue 14; docs/serverless.md).

```yaml
serverless:
  memory_size_mb: [2048, 4096]     # grid (or one value)
  max_concurrency: [2, 8]          # grid (or one value)
  cold_start_ms: 700               # local emulation only
  idle_timeout_s: 4                # local emulation only
tests: [stability, concurrency, cold_start]
concurrency_multipliers: [0.5, 1, 2]
compare_instance: {instance_type: ml.c5.large, price_per_hour: 0.119}
```

A `serverless:` section turns the sweep into a serverless one: its memory sizes x MaxConcurrency
values become the grid (`serverless.memory_size_mb`, `serverless.max_concurrency`; labels read
`memory_size_mb 2048, max_concurrency 8`), its other keys settings every configuration shares.
Memory sizes outside SageMaker's set (1024-6144 in 1 GB steps), MaxConcurrency outside 1-200,
multipliers <= 0 and unknown tests are one `UsageError` naming the key, before anything is deployed.

This module only reads the keys (pure, no import of the sweep's schema, which calls it);
`sweep/serverless.py` runs what they describe.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sm_locust.endpoint.serverless import (
    MAX_CONCURRENCY_RANGE,
    concurrency_error,
    memory_error,
)
from sm_locust.errors import UsageError

TOP_LEVEL_KEYS = ("serverless", "tests", "concurrency_multipliers", "compare_instance", "cold_start", "serverless_prices")
SECTION_KEYS = ("memory_size_mb", "max_concurrency", "cold_start_ms", "idle_timeout_s", "compute_share", "throttle_ms")
GRID_KEYS = ("memory_size_mb", "max_concurrency")
LOCAL_ONLY = ("cold_start_ms", "idle_timeout_s", "compute_share", "throttle_ms")  # the emulation's; SageMaker ignores them
PREFIX = "serverless."
TESTS = ("stability", "concurrency", "cold_start")
DEFAULT_MULTIPLIERS = (0.5, 1.0, 2.0)
COMPARE_KEYS = ("instance_type", "price_per_hour", "capacity_rps")
COLD_START_KEYS = ("rounds", "gap_s", "concurrency")
DEFAULT_ROUNDS = 2
DEFAULT_COLD_CONCURRENCY = 8  # at most this many first requests per round (each a new instance)
DEFAULT_IDLE_TIMEOUT_S = 60.0  # the emulation's (ServerlessConfig's) default
AWS_GAP_S = 600.0  # on SageMaker the idle timeout is not published: wait 10 minutes (seed 003's cold_start_delay)
GAP_MARGIN_S = 1.0  # locally: the idle timeout plus this
NOT_WITH_SERVERLESS = {
    "price_per_hour": "a serverless configuration is billed per use; give compare_instance: {instance_type, price_per_hour} "
                      "for the real-time instance to compare with",
    "instance_type": "a serverless endpoint has no instance type; compare_instance: {instance_type: ...} names the "
                     "real-time one to compare with",
    "max_cost_usd": "serverless endpoints are billed per millisecond of compute, not per endpoint-hour, so the plan "
                    "cannot hold them to a budget; leave it out",
    "configurations": "a serverless sweep's configurations are serverless.memory_size_mb x serverless.max_concurrency; "
                      "vary other settings with grid:",
}


@dataclass(frozen=True)
class CompareInstance:
    """The real-time instance the break-even is computed against."""

    instance_type: str | None = None
    price_per_hour: float | None = None
    capacity_rps: float | None = None  # what one instance serves, when known (a real-time sweep's capacity)
    price_source: str = "compare_instance.price_per_hour"

    @property
    def name(self) -> str:
        return self.instance_type or "the real-time instance"


@dataclass(frozen=True)
class ColdStartPlan:
    rounds: int = DEFAULT_ROUNDS
    gap_s: float | None = None  # None: idle timeout + 1 s locally, AWS_GAP_S on SageMaker
    concurrency: int | None = None  # None: min(MaxConcurrency, DEFAULT_COLD_CONCURRENCY)

    def gap_for(self, deploy: str, idle_timeout_s: float | None) -> float:
        if self.gap_s is not None:
            return self.gap_s
        if deploy == "local":
            return (idle_timeout_s if idle_timeout_s is not None else DEFAULT_IDLE_TIMEOUT_S) + GAP_MARGIN_S
        return AWS_GAP_S

    def concurrency_for(self, max_concurrency: int) -> int:
        return min(max_concurrency, self.concurrency or DEFAULT_COLD_CONCURRENCY)


@dataclass
class ServerlessSpec:
    memory_sizes: list[int]
    max_concurrencies: list[int]
    shared: dict[str, Any] = field(default_factory=dict)  # serverless.* settings every configuration has
    tests: tuple[str, ...] = TESTS
    multipliers: list[float] = field(default_factory=lambda: list(DEFAULT_MULTIPLIERS))
    compare: CompareInstance | None = None
    cold_start: ColdStartPlan = field(default_factory=ColdStartPlan)
    prices_file: str | None = None

    def grid(self) -> dict[str, list]:
        return {f"{PREFIX}memory_size_mb": list(self.memory_sizes), f"{PREFIX}max_concurrency": list(self.max_concurrencies)}

    def idle_timeout_s(self, settings: Mapping[str, Any]) -> float | None:
        value = settings.get(f"{PREFIX}idle_timeout_s")
        return float(value) if value is not None else None

    def as_dict(self) -> dict[str, Any]:
        return {"memory_size_mb": self.memory_sizes, "max_concurrency": self.max_concurrencies,
                **{k[len(PREFIX):]: v for k, v in self.shared.items()}, "tests": list(self.tests),
                "concurrency_multipliers": self.multipliers,
                "cold_start": {"rounds": self.cold_start.rounds, "gap_s": self.cold_start.gap_s,
                               "concurrency": self.cold_start.concurrency}}


def _error(source: str, path: str, message: str) -> UsageError:
    return UsageError(f"{source}: {path}: {message}")


def _number(source: str, path: str, value: Any, *, above: float | None = None, minimum: float | None = None,
            maximum: float | None = None, whole: bool = False) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _error(source, path, f"expected a number, got {value!r}")
    if whole and not float(value).is_integer():
        raise _error(source, path, f"expected a whole number, got {value!r}")
    if above is not None and not value > above:
        raise _error(source, path, f"must be more than {above:g}, got {value!r}")
    if minimum is not None and value < minimum:
        raise _error(source, path, f"must be at least {minimum:g}, got {value!r}")
    if maximum is not None and value > maximum:
        raise _error(source, path, f"must be at most {maximum:g}, got {value!r}")
    return int(value) if whole else float(value)


def _values(source: str, path: str, value: Any) -> list:
    values = value if isinstance(value, list) else [value]
    if not values:
        raise _error(source, path, "empty list: give at least one value")
    return values


def _mapping(source: str, path: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _error(source, path, f"expected a mapping (key: value lines), got {type(value).__name__}")
    return value


def _unknown(source: str, path: str, mapping: Mapping[str, Any], valid: tuple[str, ...]) -> None:
    for key in mapping:
        if key not in valid:
            raise _error(source, f"{path}.{key}", f"unknown key; valid keys: {', '.join(valid)}")


def parse_serverless(data: Mapping[str, Any], *, source: str = "<sweep>", deploy: str = "local",
                     base_dir: Path | None = None) -> ServerlessSpec | None:
    """The serverless keys of a sweep file, checked; None when there is no `serverless:` section
    (then the other serverless keys are refused: they mean nothing to a real-time sweep)."""
    if "serverless" not in data:
        for key in TOP_LEVEL_KEYS:
            if key in data:
                raise _error(source, key, "applies to serverless sweeps only; add a serverless: section "
                             "(memory_size_mb, max_concurrency)")
        return None
    for key, why in NOT_WITH_SERVERLESS.items():
        if data.get(key) is not None:
            raise _error(source, key, why)
    if deploy not in ("local", "sagemaker"):
        raise _error(source, "deploy", f"a serverless sweep deploys local or sagemaker, not {deploy!r}")
    section = _mapping(source, "serverless", data["serverless"])
    _unknown(source, "serverless", section, SECTION_KEYS)
    for key in GRID_KEYS:
        if key not in section:
            raise _error(source, f"serverless.{key}", "missing: give one value or a list (the grid), e.g. "
                         + ("memory_size_mb: [2048, 4096]" if key == "memory_size_mb" else "max_concurrency: [2, 8]"))
    memory = []
    for value in _values(source, "serverless.memory_size_mb", section["memory_size_mb"]):
        problem = memory_error(value)
        if problem:
            raise _error(source, "serverless.memory_size_mb", problem)
        memory.append(int(value))
    concurrency = []
    for value in _values(source, "serverless.max_concurrency", section["max_concurrency"]):
        problem = concurrency_error(value)
        if problem:
            raise _error(source, "serverless.max_concurrency", problem)
        concurrency.append(int(value))
    shared: dict[str, Any] = {}
    for key in LOCAL_ONLY:
        if key not in section:
            continue
        path = f"serverless.{key}"
        if key == "idle_timeout_s":
            shared[PREFIX + key] = _number(source, path, section[key], above=0)
        elif key == "compute_share":
            shared[PREFIX + key] = _number(source, path, section[key], minimum=0, maximum=1)
        else:
            shared[PREFIX + key] = _number(source, path, section[key], minimum=0)
    spec = ServerlessSpec(memory_sizes=memory, max_concurrencies=concurrency, shared=shared)

    if "tests" in data:
        tests = _values(source, "tests", data["tests"])
        for test in tests:
            if test not in TESTS:
                raise _error(source, "tests", f"unknown test {test!r}; choose from: {', '.join(TESTS)}")
        spec.tests = tuple(t for t in TESTS if t in tests)  # run in this order whatever the file's
    if "concurrency_multipliers" in data:
        multipliers = []
        for value in _values(source, "concurrency_multipliers", data["concurrency_multipliers"]):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise _error(source, "concurrency_multipliers", f"a multiplier is a number above 0 (client users = "
                             f"multiplier x MaxConcurrency), got {value!r}")
            if float(value) not in multipliers:
                multipliers.append(float(value))
        spec.multipliers = sorted(multipliers)
    if data.get("compare_instance") is not None:
        compare = _mapping(source, "compare_instance", data["compare_instance"])
        _unknown(source, "compare_instance", compare, COMPARE_KEYS)
        instance_type = compare.get("instance_type")
        if instance_type is not None and (not isinstance(instance_type, str) or not instance_type.strip()):
            raise _error(source, "compare_instance.instance_type", f"expected text, got {instance_type!r}")
        price = compare.get("price_per_hour")
        if price is not None:
            price = _number(source, "compare_instance.price_per_hour", price, minimum=0)
        if instance_type is None and price is None:
            raise _error(source, "compare_instance", "give instance_type (priced from the bundled table) and/or price_per_hour")
        capacity = compare.get("capacity_rps")
        if capacity is not None:
            capacity = _number(source, "compare_instance.capacity_rps", capacity, above=0)
        spec.compare = CompareInstance(instance_type.strip() if instance_type else None, price, capacity)
    if data.get("cold_start") is not None:
        cold = _mapping(source, "cold_start", data["cold_start"])
        _unknown(source, "cold_start", cold, COLD_START_KEYS)
        spec.cold_start = ColdStartPlan(
            rounds=_number(source, "cold_start.rounds", cold["rounds"], minimum=1, whole=True) if "rounds" in cold else DEFAULT_ROUNDS,
            gap_s=_number(source, "cold_start.gap_s", cold["gap_s"], above=0) if cold.get("gap_s") is not None else None,
            concurrency=(_number(source, "cold_start.concurrency", cold["concurrency"], minimum=1, maximum=MAX_CONCURRENCY_RANGE[1],
                                 whole=True) if cold.get("concurrency") is not None else None))
        if spec.cold_start.gap_s is not None and deploy == "local":
            idle = shared.get(PREFIX + "idle_timeout_s", DEFAULT_IDLE_TIMEOUT_S)
            if spec.cold_start.gap_s <= idle:
                raise _error(source, "cold_start.gap_s", f"{spec.cold_start.gap_s:g} s is not longer than the idle timeout "
                             f"({idle:g} s): the instances would still be warm")
    if data.get("serverless_prices") is not None:
        value = data["serverless_prices"]
        if not isinstance(value, str) or not value.strip():
            raise _error(source, "serverless_prices", f"expected a file name, got {value!r}")
        path = Path(value.strip()).expanduser()
        spec.prices_file = str(path if path.is_absolute() else (base_dir or Path.cwd()) / path)
    return spec
