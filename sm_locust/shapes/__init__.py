"""Load shapes: thin LoadTestShape adapters over the pure search logic (see sm_locust.plateau).

Shapes live in their own locustfiles (`sm_locust/locustfiles/<name>_shape.py`) because Locust uses
the first shape class it finds in a locustfile: `sm-locust run --shape NAME` adds the right file,
and in the web UI several can be loaded at once and picked with `--class-picker`.

| name | class | what it does |
|---|---|---|
| `step` | `StepLoadShape` | linear steps of users; optional stop at the knee / SLO / error rate |
| `plateau` | `PlateauShape` | adaptive search over users or req/s: knee placed by Little's law, then confirmed |
| `phases` | `PhasesShape` | an Inference Recommender TrafficPattern (PHASES / STAIRS) + StoppingConditions |
| `open` | `OpenLoopShape` | a constant open-loop arrival rate |
| `traffic` | `TrafficShape` | open-loop rate phases (`--traffic`), the load of an autoscaling test |
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
