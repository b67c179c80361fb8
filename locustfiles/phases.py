"""IR traffic pattern:
`locust -f locustfiles/sagemaker.py,locustfiles/phases.py --traffic-pattern pattern.json --headless`."""

from sm_locust.locustfiles.phases_shape import *  # noqa: F401,F403
