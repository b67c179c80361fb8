"""Step-load shape locustfile: add it to the default one, `-f locustfiles/sagemaker.py,locustfiles/step.py`."""

from locust import events

from sm_locust.shapes.step import StepLoadShape, register_step_options

__all__ = ["StepLoadShape"]


@events.init_command_line_parser.add_listener
def _register(parser, **_kw) -> None:
    register_step_options(parser)
