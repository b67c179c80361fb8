"""Open-loop locustfile: a constant arrival rate, `-f locustfiles/sagemaker.py,locustfiles/open.py
--target-rps 100 --arrival poisson`. In the web UI (`--class-picker`) pick `OpenLoopShape`: it
brings `OpenLoopUser`, the rate token, which the class picker does not offer on its own (it would
be preselected beside `InvokeEndpointUser`; see sm_locust/locustfiles/_webui.py)."""

from sm_locust.shapes.open import OpenLoopShape
from sm_locust.users.openloop import OpenLoopUser

__all__ = ["OpenLoopShape", "OpenLoopUser"]
