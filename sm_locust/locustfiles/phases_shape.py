"""Inference Recommender traffic-pattern shape locustfile: add it to the default one,
`-f locustfiles/sagemaker.py,locustfiles/phases.py --traffic-pattern pattern.json`."""

from sm_locust.shapes.phases import PhasesShape

__all__ = ["PhasesShape"]
