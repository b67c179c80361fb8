"""Configuration sweeps (`sm-locust sweep`): deploy each candidate serving configuration, test it
with the normal run machinery, and recommend the cheapest one that meets the objective.

Kinds (`realtime`, `serverless`, `autoscaling`) share everything but what a configuration is and
what its test measures (docs/sweep.md, docs/ARCHITECTURE.md). The package itself is the Python
API's `sm_locust.sweep(...)` (it runs `api.sweep`): importing any `sm_locust.sweep.x` binds
`sm_locust.sweep` to this package, so only a callable package keeps one identity.
"""

from __future__ import annotations

import sys
import types
from typing import Any


class _CallablePackage(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """sm_locust.sweep(source, *, out=None, yes=False, model=None, ...): see `sm_locust.sweep.api.sweep`."""
        from sm_locust.sweep.api import sweep  # lazy: the whole sweep (every kind); the package's __init__ stays empty

        return sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
