"""sm-locust: load-test Amazon SageMaker inference endpoints with Locust.

Importing `sm_locust` is cheap and has no side effects: everything below is loaded on first use.
The Python API (`run`, `load`, `compare`, `sweep`, `LocalEndpoint`; docs/python-api.md) never
imports Locust into the calling process: Locust runs in a child process, so a notebook kernel is
not patched by gevent. The Locust-facing classes (`from sm_locust import SageMakerUser`) do import
Locust, as any locustfile does.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

__version__ = "0.1.0"

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time each name loads on first use (_LAZY)
    from sm_locust.api.compare import compare
    from sm_locust.api.result import RunResult, load
    from sm_locust.api.run import run
    from sm_locust.endpoint.server import LocalEndpoint
    from sm_locust.errors import RunError, SmLocustError, UsageError
    from sm_locust.invocation import Invocation, InvocationError
    from sm_locust.sweep.api import SweepResult
    from sm_locust.transport import create_client
    from sm_locust.transport.boto3 import Boto3SageMakerClient
    from sm_locust.transport.contract import SageMakerClient
    from sm_locust.transport.fast import FastSageMakerClient
    from sm_locust.users.sagemaker import FastSageMakerUser, SageMakerUser

_LAZY = {
    "run": "sm_locust.api.run",
    "load": "sm_locust.api.result",
    "RunResult": "sm_locust.api.result",
    "compare": "sm_locust.api.compare",
    "SweepResult": "sm_locust.sweep.api",
    "LocalEndpoint": "sm_locust.endpoint.server",
    "SmLocustError": "sm_locust.errors",
    "UsageError": "sm_locust.errors",
    "RunError": "sm_locust.errors",
    "SageMakerUser": "sm_locust.users.sagemaker",
    "FastSageMakerUser": "sm_locust.users.sagemaker",
    "create_client": "sm_locust.transport",
    "SageMakerClient": "sm_locust.transport.contract",
    "FastSageMakerClient": "sm_locust.transport.fast",
    "Boto3SageMakerClient": "sm_locust.transport.boto3",
    "Invocation": "sm_locust.invocation",
    "InvocationError": "sm_locust.invocation",
}

__all__ = [  # written out, not computed, so linters and type checkers read it (tests/package pins it)
    "__version__", "sweep", "run", "load", "RunResult", "compare", "SweepResult", "LocalEndpoint", "SmLocustError",
    "UsageError", "RunError", "SageMakerUser", "FastSageMakerUser", "create_client", "SageMakerClient",
    "FastSageMakerClient", "Boto3SageMakerClient", "Invocation", "InvocationError",
]


# The sweep package is imported first (its marker imports nothing), so the import system binds the
# attribute `sweep` to it now, once; the function below then takes the name, and importing any sweep
# module later leaves it alone (the import system binds a package's attribute only when it first loads it).
importlib.import_module("sm_locust.sweep")


def sweep(source: str | Path | Mapping[str, object], *, out: str | Path | None = None, yes: bool = False,
          model: object = None, client: object = None, overrides: list[str] | None = None) -> SweepResult:
    """Check, plan and run a sweep as `sm-locust sweep` does (docs/python-api.md): `source` a sweep file's
    path or its content as a mapping, `model` a sagemaker.model.Model to clone settings from."""
    from sm_locust.sweep.api import sweep as run_sweep  # lazy: every sweep kind; `import sm_locust` stays cheap

    return run_sweep(source, out=out, yes=yes, model=model, client=client, overrides=overrides)


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sm_locust' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
