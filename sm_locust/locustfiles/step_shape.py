"""Step-load shape locustfile: add it to the default one, `-f locustfiles/sagemaker.py,locustfiles/step.py`.
Its options (--start-users, --step-users, --step-seconds, --max-users) are registered by the default locustfile."""

from sm_locust.shapes.step import StepLoadShape

__all__ = ["StepLoadShape"]
