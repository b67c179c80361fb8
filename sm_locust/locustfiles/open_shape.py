"""Open-loop locustfile: a constant arrival rate, `-f locustfiles/sagemaker.py,locustfiles/open.py
--target-rps 100 --arrival poisson`. Without a shape (web UI, class picker) pick `OpenLoopUser`:
the number of users is the rate in req/s (times `--rate-per-user`)."""

from sm_locust.users.openloop import OpenLoopUser
from sm_locust.shapes.open import OpenLoopShape

__all__ = ["OpenLoopShape", "OpenLoopUser"]
