"""The serverless kind's keys of a sweep file, checked (docs/serverless.md has an example).

A `serverless:` section makes the sweep a serverless one: memory sizes x MaxConcurrency values are
the grid (`serverless.memory_size_mb`, `serverless.max_concurrency`), other keys shared settings.
Memory sizes outside SageMaker's set (1024-6144 in 1 GB steps), MaxConcurrency outside 1-200,
multipliers <= 0 and unknown tests are one `UsageError` naming the key, before anything is deployed.
Only reads the keys, with the sweep's one checker (`sweep/validate.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sm_locust.endpoint.serverless import (
    MAX_CONCURRENCY_RANGE,
    concurrency_error,
    memory_error,
)
from sm_locust.sweep.kinds import KINDS
from sm_locust.sweep.validate import Checker

SECTION = "serverless"  # the kind's name (sweep/kinds.py registers its section and keys)
KEYS = KINDS.get(SECTION).keys  # besides the section
SECTION_KEYS = ("memory_size_mb", "max_concurrency", "cold_start_ms", "idle_timeout_s", "compute_share", "throttle_ms")
GRID_KEYS = ("memory_size_mb", "max_concurrency")
# the emulation's; SageMaker ignores them
LOCAL_ONLY = ("cold_start_ms", "idle_timeout_s", "compute_share", "throttle_ms")
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
REFUSED = {  # shared keys that mean nothing to a serverless sweep, and why
    "price_per_hour": "a serverless configuration is billed per use; give compare_instance: "
                      "{instance_type, price_per_hour} for the real-time instance to compare with",
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
        return {f"{PREFIX}memory_size_mb": list(self.memory_sizes),
                f"{PREFIX}max_concurrency": list(self.max_concurrencies)}

    def idle_timeout_s(self, settings: Mapping[str, Any]) -> float | None:
        value = settings.get(f"{PREFIX}idle_timeout_s")
        return float(value) if value is not None else None

    def as_dict(self) -> dict[str, object]:
        return {"memory_size_mb": self.memory_sizes, "max_concurrency": self.max_concurrencies,
                **{k[len(PREFIX):]: v for k, v in self.shared.items()}, "tests": list(self.tests),
                "concurrency_multipliers": self.multipliers,
                "cold_start": {"rounds": self.cold_start.rounds, "gap_s": self.cold_start.gap_s,
                               "concurrency": self.cold_start.concurrency}}


def _sizes(check: Checker, key: str, value: object, problem_of: Callable[[Any], str | None]) -> list[int]:
    """One value or a list of whole numbers SageMaker allows (`problem_of` says why one is not)."""
    sizes = []
    for item in check.values(f"{SECTION}.{key}", value):
        problem = problem_of(item)
        if problem:
            raise check.error(f"{SECTION}.{key}", problem)
        sizes.append(int(item))
    return sizes


def parse_section(data: Mapping[str, object], check: Checker, deploy: str = "local",
                  base_dir: Path | None = None) -> ServerlessSpec:
    """The serverless keys of a sweep file that has a `serverless:` section, checked (`schema.py`
    calls it; the shared keys a serverless sweep refuses, `REFUSED`, are checked before)."""
    if deploy not in ("local", "sagemaker"):
        raise check.error("deploy", f"a serverless sweep deploys local or sagemaker, not {deploy!r}")
    section = check.mapping(SECTION, data[SECTION])
    check.unknown(SECTION, section, SECTION_KEYS)
    grid_value = data.get("grid")
    grid: Mapping[str, object] = grid_value if isinstance(grid_value, Mapping) else {}
    for key in GRID_KEYS:  # was: "the local deployer has no setting 'max_concurrency'" (a different concurrency)
        if key in grid:
            raise check.error(f"grid.{key}", f"a serverless sweep's {key} is {SECTION}.{key} (one value or a list: "
                              f"its grid axis), not a grid: key; move it to {SECTION}: {{{key}: {grid[key]!r}}}")
    for key in GRID_KEYS:
        if key not in section:
            example = "memory_size_mb: [2048, 4096]" if key == "memory_size_mb" else "max_concurrency: [2, 8]"
            raise check.error(f"{SECTION}.{key}", f"missing: give one value or a list (the grid), e.g. {example}")
    memory = _sizes(check, "memory_size_mb", section["memory_size_mb"], memory_error)
    concurrency = _sizes(check, "max_concurrency", section["max_concurrency"], concurrency_error)
    shared: dict[str, Any] = {}
    for key in LOCAL_ONLY:
        if key not in section:
            continue
        path = f"{SECTION}.{key}"
        if key == "idle_timeout_s":
            shared[PREFIX + key] = check.number(path, section[key], above=0)
        elif key == "compute_share":
            shared[PREFIX + key] = check.number(path, section[key], minimum=0, maximum=1)
        else:
            shared[PREFIX + key] = check.number(path, section[key], minimum=0)
    spec = ServerlessSpec(memory_sizes=memory, max_concurrencies=concurrency, shared=shared)

    if "tests" in data:
        tests = check.values("tests", data["tests"])
        for test in tests:
            if test not in TESTS:
                raise check.error("tests", f"unknown test {test!r}; choose from: {', '.join(TESTS)}")
        spec.tests = tuple(t for t in TESTS if t in tests)  # run in this order whatever the file's
    if "concurrency_multipliers" in data:
        multipliers: list[float] = []
        for value in check.values("concurrency_multipliers", data["concurrency_multipliers"]):
            multiplier = check.number("concurrency_multipliers", value, above=0, expected="a multiplier is a number "
                                      "above 0 (client users = multiplier x MaxConcurrency)")
            if multiplier not in multipliers:
                multipliers.append(multiplier)
        spec.multipliers = sorted(multipliers)
    if data.get("compare_instance") is not None:
        compare = check.mapping("compare_instance", data["compare_instance"])
        check.unknown("compare_instance", compare, COMPARE_KEYS)
        instance_type = compare.get("instance_type")
        if instance_type is not None:
            instance_type = check.text("compare_instance.instance_type", instance_type)
        price = compare.get("price_per_hour")
        if price is not None:
            price = check.number("compare_instance.price_per_hour", price, minimum=0)
        if instance_type is None and price is None:
            raise check.error("compare_instance",
                              "give instance_type (priced from the bundled table) and/or price_per_hour")
        capacity = compare.get("capacity_rps")
        if capacity is not None:
            capacity = check.number("compare_instance.capacity_rps", capacity, above=0)
        spec.compare = CompareInstance(instance_type, price, capacity)
    if data.get("cold_start") is not None:
        cold = check.mapping("cold_start", data["cold_start"])
        check.unknown("cold_start", cold, COLD_START_KEYS)
        plan = ColdStartPlan()
        if "rounds" in cold:
            plan = replace(plan, rounds=check.integer("cold_start.rounds", cold["rounds"], minimum=1))
        if cold.get("gap_s") is not None:
            plan = replace(plan, gap_s=check.number("cold_start.gap_s", cold["gap_s"], above=0))
        if cold.get("concurrency") is not None:
            plan = replace(plan, concurrency=check.integer("cold_start.concurrency", cold["concurrency"], minimum=1,
                                                           maximum=MAX_CONCURRENCY_RANGE[1]))
        spec.cold_start = plan
        if spec.cold_start.gap_s is not None and deploy == "local":
            idle = shared.get(PREFIX + "idle_timeout_s", DEFAULT_IDLE_TIMEOUT_S)
            if spec.cold_start.gap_s <= idle:
                raise check.error("cold_start.gap_s",
                                  f"{spec.cold_start.gap_s:g} s is not longer than the idle timeout "
                                  f"({idle:g} s): the instances would still be warm")
    if data.get("serverless_prices") is not None:
        spec.prices_file = check.file("serverless_prices", data["serverless_prices"], base_dir or Path.cwd())
    return spec
