"""Configuration sweeps (`sm-locust sweep`): deploy each candidate serving configuration, find its
plateau with the normal run machinery, and recommend the cheapest one that meets the objective.

The loop the seed articles describe (tune workers, threads, batching, instance types; load-test
each; compare throughput, latency and $ per 1M inferences), as folders by responsibility:

    schema.py      the sweep file: read (YAML/JSON), validate (unknown keys named with their path)
    grid.py        grid + explicit list -> configurations (pure)
    load.py        the `load:` section -> the options and LoadSettings of `sm-locust run`
    deployers/     where a configuration runs: `local` (the embedded endpoint), `sagemaker` (boto3)
    pipeline.py    which endpoint to create, test and delete next, at most N alive (pure)
    measure.py     a run folder's summary.json -> the figures a sweep compares (pure)
    costing.py     prices (report/cost.py's table), $ per 1M, instances for the target, plan estimates
    objective.py   eligibility, ranking, recommendation, Pareto front (pure)
    progress.py    one line per configuration, a bar with ETA
    runner.py      drives it all; resume, overlap, cleanup on success, failure, SIGINT, SIGTERM
    render.py      sweep.json, sweep.csv, sweep.html
    api.py         the Python entry points (`load_sweep`, `plan`, `run_sweep`, `cleanup`)
    serverless*.py serverless sweeps (a `serverless:` section): memory x MaxConcurrency, stability /
                   concurrency / cold-start tests, cost and break-even vs real-time (docs/serverless.md)

docs/sweep.md documents the file and the outputs.

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
        from sm_locust.sweep.api import sweep

        return sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
