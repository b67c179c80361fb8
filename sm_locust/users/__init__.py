"""Locust Users and what they send: the one public User, open-loop arrivals, fan-out sending.

- `sagemaker`: `SageMakerUser` (one vocabulary, whichever transport) and its alias `FastSageMakerUser`;
- `openloop`: `OpenLoopUser`, rate tokens whose process scheduler sends at intended times;
- `fanout`: `invoke_split`, one logical request sent as its K pre-encoded parts (`--split K`).

`from sm_locust.users import SageMakerUser` loads the User module on first use: it imports Locust,
which patches gevent; importing this package alone (e.g. for `sm_locust.users.fanout`) does not.
"""

from __future__ import annotations

import importlib

_LAZY = {"SageMakerUser": "sm_locust.users.sagemaker", "FastSageMakerUser": "sm_locust.users.sagemaker"}

__all__ = list(_LAZY)


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sm_locust.users' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
