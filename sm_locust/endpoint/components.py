"""Local emulation of SageMaker inference components (`sm-locust serve --inference-components a:2,b:1`).

Each component (`NAME:COPIES[:SERVICE_MS]`) has COPIES concurrency slots in one shared-memory table
made before gunicorn forks, so copies hold for the whole endpoint; a request beyond them polls every
millisecond for a free copy (not strictly FIFO). InferenceComponentName picks the component; none,
or an unknown one, is SageMaker's ValidationError (docs/facts.md). Per-component counts are on
`/_sm_locust/stats` under `inference_components`. `parse_components` and `ComponentSpec` are pure;
`ComponentRouter` takes a sleep so tests drive it (docs/multi-model.md).
"""

from __future__ import annotations

import multiprocessing
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

COMPONENT_ENVIRON = "HTTP_X_AMZN_SAGEMAKER_INFERENCE_COMPONENT"
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9]([\-a-zA-Z0-9]*[a-zA-Z0-9])?$")  # botocore's InferenceComponentName
NAME_MAX = 63
POLL_S = 0.001  # how often a request queued for a copy looks again
ACCOUNT = "000000000000"
REQUIRED = ("Inference Component Name header is required for endpoints to which you plan to deploy inference "
            "components. Please include Inference Component Name header or consider using SageMaker models.")


@dataclass(frozen=True)
class ComponentSpec:
    """One inference component: its name, its copies, its own service time (None: --service-time-ms)."""

    name: str
    copies: int
    service_ms: float | None = None

    def flag(self) -> str:
        return f"{self.name}:{self.copies}" + (f":{self.service_ms:g}" if self.service_ms is not None else "")


def parse_components(text: str) -> tuple[ComponentSpec, ...]:
    """`a:2,b:1:30` -> components; ValueError with a one-line reason for anything else."""
    specs: list[ComponentSpec] = []
    for part in (p.strip() for p in str(text).split(",")):
        if not part:
            continue
        fields = part.split(":")
        if len(fields) not in (2, 3):
            raise ValueError(f"--inference-components {part!r}: write NAME:COPIES or NAME:COPIES:SERVICE_MS, "
                             "e.g. a:2,b:1")
        name = fields[0]
        if len(name) > NAME_MAX or not NAME_PATTERN.match(name):
            raise ValueError(f"--inference-components: {name!r} is not an inference component name (letters, "
                             f"digits and inner hyphens, at most {NAME_MAX} characters)")
        try:
            copies = int(fields[1])
            service = float(fields[2]) if len(fields) == 3 else None
        except ValueError:
            raise ValueError(f"--inference-components {part!r}: COPIES is a whole number and SERVICE_MS a "
                             "number") from None
        if copies < 1 or (service is not None and service < 0):
            raise ValueError(f"--inference-components {part!r}: at least 1 copy, and a service time of 0 ms or more")
        if any(s.name == name for s in specs):
            raise ValueError(f"--inference-components names {name!r} twice")
        specs.append(ComponentSpec(name, copies, service))
    if not specs:
        raise ValueError("--inference-components needs at least one NAME:COPIES")
    return tuple(specs)


# per component: copies busy, requests, most busy at once
_BUSY, _REQUESTS, _MAX = range(3)
_FIELDS = 3


class ComponentTable:
    """Every component's busy copies and counts in shared memory, safe across forked workers."""

    def __init__(self, specs: Sequence[ComponentSpec]):
        self.specs = tuple(specs)
        self._array = multiprocessing.get_context("fork").Array("d", _FIELDS * len(self.specs), lock=True)

    def try_acquire(self, k: int) -> bool:
        """Take one of component k's copies if one is free."""
        a = self._array
        with a.get_lock():
            raw: Any = a.get_obj()
            busy = raw[_FIELDS * k + _BUSY]
            if busy >= self.specs[k].copies:
                return False
            raw[_FIELDS * k + _BUSY] = busy + 1
            raw[_FIELDS * k + _MAX] = max(raw[_FIELDS * k + _MAX], busy + 1)
            return True

    def count(self, k: int) -> None:
        with self._array.get_lock():
            raw: Any = self._array.get_obj()
            raw[_FIELDS * k + _REQUESTS] += 1

    def release(self, k: int) -> None:
        with self._array.get_lock():
            raw: Any = self._array.get_obj()
            raw[_FIELDS * k + _BUSY] -= 1

    def snapshot(self) -> dict[str, dict[str, int]]:
        with self._array.get_lock():
            values: list[float] = list(self._array.get_obj())
        return {s.name: {"copies": s.copies, "requests": int(values[_FIELDS * k + _REQUESTS]),
                         "busy": int(values[_FIELDS * k + _BUSY]), "max_busy": int(values[_FIELDS * k + _MAX])}
                for k, s in enumerate(self.specs)}


class ComponentRouter:
    """Routing by InferenceComponentName and a copy of the component around one invocation (one per
    worker; one table for all)."""

    def __init__(self, specs: Sequence[ComponentSpec], table: ComponentTable | None = None,
                 default_service_ms: float = 0.0, sleep: Callable[[float], None] | None = None):
        self.table = table or ComponentTable(specs)
        self.specs = self.table.specs
        self.index = {s.name: k for k, s in enumerate(self.specs)}
        self.service_s = [(s.service_ms if s.service_ms is not None else default_service_ms) / 1000.0
                          for s in self.specs]
        # time.sleep looked up when called: gunicorn's gevent worker patches it after this module is imported
        self.sleep = sleep or (lambda seconds: time.sleep(seconds))

    def check(self, environ) -> tuple[str, str] | None:
        """(error code, message) for a request SageMaker refuses before any model work, else None."""
        name = environ.get(COMPONENT_ENVIRON)
        if not name:
            return "ValidationError", REQUIRED
        if name not in self.index:
            return "ValidationError", f"Inference Component {name} of account {ACCOUNT} not found."
        return None

    def serve(self, environ, start_response, answer: Callable[..., list], error: Callable[..., list]) -> list:
        """Queue for a copy of the request's component, run `answer(start_response, service_s)` on it, free it."""
        k = self.index[environ[COMPONENT_ENVIRON]]
        self.table.count(k)
        while not self.table.try_acquire(k):
            self.sleep(POLL_S)
        try:
            return answer(start_response, self.service_s[k])
        finally:
            self.table.release(k)

    def stats(self) -> dict[str, object]:
        return {"inference_components": self.table.snapshot()}
