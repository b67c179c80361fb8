"""Plateau search: `locust -f locustfiles/sagemaker.py,locustfiles/plateau.py --latency-slo-ms 100 --headless`."""

from sm_locust.locustfiles.plateau_shape import *  # noqa: F401,F403
