"""Autoscaling sweeps: target-tracking policies under a traffic pattern, each deployed, loaded, priced
and ranked (docs/autoscaling.md). `sweep.py` lists the modules; this package's `__init__` imports
nothing on purpose (`spec.py` is read for every autoscaling sweep file).
"""
