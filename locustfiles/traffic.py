"""Open-loop rate phases (autoscaling tests):
`locust -f locustfiles/sagemaker.py,locustfiles/traffic.py --traffic traffic.yaml --headless`."""

from sm_locust.locustfiles.traffic_shape import *  # noqa: F401,F403
