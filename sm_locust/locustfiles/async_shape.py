"""Async capacity search locustfile: open-loop rate steps until the async backlog grows,
`-f locustfiles/sagemaker.py,locustfiles/async_shape.py --async-input-location s3://... --async-result s3`."""

from sm_locust.shapes.asyncsearch import AsyncSearchShape
from sm_locust.users.openloop import OpenLoopUser

__all__ = ["AsyncSearchShape", "OpenLoopUser"]
