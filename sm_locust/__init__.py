"""sm-locust: load-test Amazon SageMaker inference endpoints with Locust.

Importing `sm_locust` is cheap and has no side effects: the Locust-facing classes are loaded on
first use (`from sm_locust import SageMakerUser` imports Locust, which patches gevent, as any
locustfile does).
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_LAZY = {
    "SageMakerUser": "sm_locust.users.sagemaker",
    "FastSageMakerUser": "sm_locust.users.sagemaker",
    "create_client": "sm_locust.transport",
    "SageMakerClient": "sm_locust.transport.contract",
    "FastSageMakerClient": "sm_locust.transport.fast",
    "Boto3SageMakerClient": "sm_locust.transport.boto3",
    "Invocation": "sm_locust.invocation",
    "InvocationError": "sm_locust.invocation",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sm_locust' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
