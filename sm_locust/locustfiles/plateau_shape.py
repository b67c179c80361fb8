"""Plateau search shape locustfile: add it to the default one,
`-f locustfiles/sagemaker.py,locustfiles/plateau.py`. It also holds `OpenLoopUser` for
`--search-mode rate` (in users mode the shape never spawns it). Its options are registered by the
default locustfile."""

from sm_locust.shapes.plateau import PlateauShape
from sm_locust.users.openloop import OpenLoopUser

__all__ = ["OpenLoopUser", "PlateauShape"]
