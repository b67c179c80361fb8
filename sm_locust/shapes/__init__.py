"""Load shapes: thin LoadTestShape adapters over the pure search logic (sm_locust.plateau).

Each shape lives in its own locustfile (`sm_locust/locustfiles/<name>_shape.py`) because Locust uses
the first shape class it finds: `sm-locust run --shape NAME` adds the right file. Shapes: `step`,
`plateau`, `phases`, `open`, `traffic` (docs/plateau.md), `async` (docs/async.md), `trace` (docs/llm.md).
"""

from __future__ import annotations

from sm_locust.util.registry import Registry

# shape name -> shipped locustfile holding it
SHAPES: Registry[str] = Registry("shape")
SHAPES.add("step", "step_shape", "steps")
SHAPES.add("plateau", "plateau_shape", "search", "adaptive")
SHAPES.add("phases", "phases_shape", "stairs", "traffic-pattern", "ir")
SHAPES.add("open", "open_shape", "open-loop", "rate")
SHAPES.add("traffic", "traffic_shape", "rates", "rate-phases")
SHAPES.add("async", "async_shape", "async-search")
SHAPES.add("trace", "trace_shape", "replay")
