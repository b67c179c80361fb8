"""The Python API: load tests from a notebook or a script, results as objects (docs/python-api.md).

    import sm_locust
    result = sm_locust.run("my-endpoint", payload="body.json", shape="plateau", latency_slo_ms=200)
    result                       # in a notebook: the verdict and throughput / latency vs users
    result.steps                 # pandas DataFrames: .steps, .timeline, .errors; .plateau; .summary
    result.report()              # report.html (with CloudWatch and cost), its path
    sm_locust.compare([result, "reports/earlier-run"])      # a DataFrame, one row per run
    sm_locust.sweep("sweep.yaml", yes=True)                  # a SweepResult: .table, .recommendation

Why a package of its own: it is an edge like `cli/`, over the same machinery. `run` builds the
options of `sm-locust run` from keyword arguments (`options.py`: the CLI's own parser, so the same
defaults and the same one-line errors) and calls the CLI's `start_run`, so Locust runs in a child
process exactly as for the CLI and the calling interpreter (a notebook kernel) is never
monkey-patched by gevent. `predictor.py` reads a SageMaker SDK Predictor by duck typing (the
`sagemaker` package stays an optional extra), `progress.py` turns the child's output into one line
that updates in place, `result.py` is `RunResult` and `load`, `compare.py` is `compare`. The
sweep's entry point is the function `sm_locust.sweep` (sm_locust/__init__.py), which runs `sweep.api.sweep`.

Nothing is imported here: `import sm_locust` stays cheap (sm_locust/__init__.py loads these lazily).
"""
