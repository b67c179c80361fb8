"""Open loop:
`locust -f locustfiles/sagemaker.py,locustfiles/open.py --target-rps 100 --arrival poisson -t 1m --headless`."""

from sm_locust.locustfiles.open_shape import *  # noqa: F401,F403
