"""Configuration sweeps (`sm-locust sweep`): deploy each candidate serving configuration, test it
with the normal run machinery, and recommend the cheapest one that meets the objective.

The loop the seed articles describe (tune workers, threads, batching, instance types; load-test
each; compare throughput, latency and $ per 1M inferences), for several *kinds* of sweep that
share everything but what a configuration is and what its test measures:

    api.py         the entry points (`load_sweep`, `plan_lines`, `run_sweep`, `sweep`, `cleanup`)
    schema.py      the sweep file: read (YAML/JSON), `--set`, the shared keys checked
    validate.py    the one checker: how a value is judged and worded (numbers, mappings, keys, ...)
    kinds.py       the registry of sweep kinds: which section makes a file which kind
    grid.py        grid + explicit list -> configurations (pure)
    load.py        the `load:` section -> the options and LoadSettings of `sm-locust run`
    deployers/     where a configuration runs: `local` (the embedded endpoint), `sagemaker` (boto3)
    base.py        `Sweep`: what every kind is; the plan's estimates, the budget, sweep.json's head
    rows.py        a configuration's row, typed; the one place it becomes a sweep.json object
    pipeline.py    which endpoint to create, test and delete next, at most N alive (pure)
    runner.py      drives any kind; resume, overlap, cleanup on success, failure, SIGINT, SIGTERM
    costing.py     instance prices (report/cost.py's table), $ per 1M, plan estimates
    objective.py   the `objective:` section and the helpers every kind's ranking shares (pure)
    progress.py    what a sweep prints: lines, a bar with ETA, the runs' step lines
    render.py      the page, table and files every kind's outputs share
    realtime/      the default kind: instance-backed endpoints, a plateau search each
    serverless/    the `serverless:` kind: memory x MaxConcurrency, throttles, cold starts, break-even
    autoscaling/   the `autoscaling:` kind: scaling policies under growing traffic

docs/sweep.md documents the file, the outputs and how to add a kind; docs/serverless.md the
serverless kind.

The package is also the Python API's `sm_locust.sweep(...)`: calling it runs `api.sweep` and returns
its `SweepResult` (`.table`, `.recommendation`, shown inline in a notebook). Why the package itself is
callable: `import sm_locust.sweep.x` (by anyone, at any time) binds the attribute `sm_locust.sweep`
to this package, so a function of that name in `sm_locust/__init__` would be replaced by the package
as soon as any sweep module is imported. A callable package has one identity before and after.
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
