"""Configuration sweeps (`sm-locust sweep`): deploy each candidate serving configuration, test it
with the normal run machinery, and recommend the cheapest one that meets the objective.

Kinds (`realtime`, `serverless`, `autoscaling`, `async`) share everything but what a configuration is and
what its test measures (docs/sweep.md, docs/ARCHITECTURE.md). The Python API's entry point is the
function `sm_locust.sweep` (sm_locust/__init__.py), which runs `sweep.api.sweep`; this package marker
imports nothing.
"""
