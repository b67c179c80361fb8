"""Default sm-locust locustfile: `locust -f locustfiles/sagemaker.py --endpoint-name NAME --payload FILE`.

The code lives in the installed package (`sm_locust.locustfiles.sagemaker`) so that `sm-locust run`
and this file behave the same; copy this file and subclass `SageMakerUser` to write your own.
"""

from sm_locust.locustfiles.sagemaker import *  # noqa: F401,F403  (InvokeEndpointUser + listeners)
