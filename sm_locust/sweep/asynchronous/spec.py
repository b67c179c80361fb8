"""The async kind's section of a sweep file, checked (docs/async.md, "Sweeping instances and workers").

An `async:` section makes the sweep an async one: `instance_count` and
`max_concurrent_invocations_per_instance` (AsyncInferenceConfig's ClientConfig) are the grid
(`async.instance_count`, `async.max_concurrent_invocations_per_instance`: one value or a list each).
Values outside SageMaker's range (MaxConcurrentInvocationsPerInstance 1-1000, docs/facts.md) or not
whole are one `UsageError` naming the key, before anything is deployed. Only reads the keys, with the
sweep's one checker (`sweep/validate.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sm_locust.endpoint.options import MAX_ASYNC_CONCURRENT
from sm_locust.scaling.policy import MAX_INSTANCES
from sm_locust.sweep.kinds import KINDS
from sm_locust.sweep.validate import Checker

SECTION = "async"  # the kind's name and section (sweep/kinds.py registers it)
KEYS = KINDS.get(SECTION).keys  # besides the section (none)
PREFIX = "async."
INSTANCES = "instance_count"
WORKERS = "max_concurrent_invocations_per_instance"
SECTION_KEYS = (INSTANCES, WORKERS)
INSTANCES_SETTING = PREFIX + INSTANCES
WORKERS_SETTING = PREFIX + WORKERS
REFUSED = {  # shared keys that mean nothing to an async sweep, and why
    "configurations": "an async sweep's configurations are async.instance_count x "
                      "async.max_concurrent_invocations_per_instance; vary other settings with grid:",
}
CLASHES = {  # settings elsewhere that are one of the section's axes under another name
    "instance_count": INSTANCES, "async_max_concurrent": WORKERS,
}


@dataclass
class AsyncSpec:
    """The section: the instance counts and MaxConcurrentInvocationsPerInstance values (each a grid axis)."""

    instance_counts: list[int]
    max_concurrent: list[int]
    shared: dict[str, object] = field(default_factory=dict)  # no shared settings of its own: endpoint: holds them

    def grid(self) -> dict[str, list[object]]:
        return {INSTANCES_SETTING: list(self.instance_counts), WORKERS_SETTING: list(self.max_concurrent)}

    def as_dict(self) -> dict[str, object]:
        return {INSTANCES: list(self.instance_counts), WORKERS: list(self.max_concurrent)}


def _whole(check: Checker, key: str, value: object, maximum: int) -> list[int]:
    """One whole number or a list of them in 1..maximum, duplicates dropped, in file order."""
    out: list[int] = []
    for item in check.values(f"{SECTION}.{key}", value):
        number = check.integer(f"{SECTION}.{key}", item, minimum=1, maximum=maximum,
                               expected=f"expected a whole number from 1 to {maximum:,}")
        if number not in out:
            out.append(number)
    return out


def parse_section(data: Mapping[str, object], check: Checker, deploy: str = "local",
                  base_dir: Path | None = None) -> AsyncSpec:
    """The `async:` section of a sweep file (`schema.py` calls it after checking `REFUSED`)."""
    if deploy not in ("local", "sagemaker"):
        raise check.error("deploy", f"an async sweep deploys local or sagemaker, not {deploy!r}")
    section = check.mapping(SECTION, data[SECTION])
    check.unknown(SECTION, section, SECTION_KEYS)
    grid_value, endpoint_value = data.get("grid"), data.get("endpoint")
    for where, given in (("grid", grid_value), ("endpoint", endpoint_value)):
        for key, axis in CLASHES.items():
            if isinstance(given, Mapping) and key in given:
                raise check.error(f"{where}.{key}", f"an async sweep's {axis} is {SECTION}.{axis} (one value or a "
                                  f"list: its grid axis); move it to {SECTION}: {{{axis}: {given[key]!r}}}")
    for key, example in ((INSTANCES, "instance_count: [1, 2]"), (WORKERS, "max_concurrent_invocations_per_instance: "
                                                                          "[1, 4]")):
        if key not in section:
            raise check.error(f"{SECTION}.{key}", f"missing: give one value or a list (the grid), e.g. {example}")
    return AsyncSpec(_whole(check, INSTANCES, section[INSTANCES], MAX_INSTANCES),
                     _whole(check, WORKERS, section[WORKERS], MAX_ASYNC_CONCURRENT))
