"""The run core: what a run is, from options to the result, for every entry point.

`cli/`, `api/` and `sweep/` call it; it never imports them. (Named `core`, not `run`: a
sub-package `sm_locust.run` would replace the Python API's `sm_locust.run(...)` function as soon as
anything imported it, the reason `sm_locust.sweep` is a callable package.)

    launch.py     Locust in a child process of its own session, the run folder, signals forwarded
    preflight.py  the checks before anything starts: region, reachability, credentials
"""
