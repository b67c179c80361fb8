"""Rate-phases shape locustfile (autoscaling tests): add it to the default one,
`-f locustfiles/sagemaker.py,locustfiles/traffic.py --traffic traffic.yaml`."""

from sm_locust.shapes.traffic import TrafficShape
from sm_locust.users.openloop import OpenLoopUser

__all__ = ["OpenLoopUser", "TrafficShape"]
