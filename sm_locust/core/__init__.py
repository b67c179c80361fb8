"""The run core: what a run is, from options to the result, for every entry point.

`cli/`, `api/` and `sweep/` call it; it never imports them. (Named `core`, not `run`: a sub-package
`sm_locust.run` would take the name of the Python API's `sm_locust.run(...)` function.)

    arguments.py, plan.py, rules.py   what a run was asked, checked once into RunSettings
    start.py      start_run: the last checks, then the child; repeat.py: --repeat N
    folder.py     the run folder (--out, --overwrite)
    child.py      Locust in a child process of its own session, signals forwarded; summary.json typed
    verdict.py    the closing verdict line and why a run measured nothing
"""
