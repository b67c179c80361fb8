"""Step-load shape:
`locust -f locustfiles/sagemaker.py,locustfiles/step.py --step-users 2 --step-seconds 30 --max-users 20`."""

from sm_locust.locustfiles.step_shape import *  # noqa: F401,F403
