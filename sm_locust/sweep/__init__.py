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
"""
