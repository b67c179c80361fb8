"""Load shapes: thin LoadTestShape adapters over pure schedules (see sm_locust.plateau).

Shapes live in their own locustfiles (`sm_locust/locustfiles/<name>_shape.py`) because Locust uses
the first shape class it finds in a locustfile: `sm-locust run --shape NAME` adds the right file.
"""

from __future__ import annotations

from sm_locust.registry import Registry

# shape name -> shipped locustfile holding it
SHAPES: Registry[str] = Registry("shape")
SHAPES.add("step", "step_shape")
