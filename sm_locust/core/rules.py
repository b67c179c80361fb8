"""The rules of a run's load that every entry point shares (`sm-locust run`, `smoke`, the Python API,
a sweep's `load:`, an autoscaling sweep), written once (pure).

Why here: the CLI, the sweep and the autoscaling kind each had their own copy of "users conflict
with a shape that decides the load", and one had drifted (a sweep let `users` beside the traffic
shape through). Each caller words the names its user typed (`--users` on a command line,
`load.users` in a sweep file); the rule itself is this module's.
"""

from __future__ import annotations

from collections.abc import Callable

from sm_locust.errors import UsageError
from sm_locust.shapes import SHAPES

# Shapes whose own logic decides how many users run: a fixed user count beside them contradicts it.
SHAPES_THAT_DECIDE_THE_LOAD = ("plateau", "phases", "open", "traffic", "async", "trace")
DEFAULT_RUN_TIME = "1m"  # a run without a shape (constant users) or with the open shape and no budget
SHAPE_SPAWN_RATE = 100.0  # users/s when a shape decides: Locust warns above 100 (shapes/settings.py)


def chosen_shape(shape: str | None, *, target_rps: float | None, traffic: str | None,
                 default: str | None = None, trace: str | None = None) -> str | None:
    """The canonical shape name: the one named (an alias resolved; unknown: a UsageError listing the
    shapes), else the one the options imply (`--target-rps` alone: open; `--traffic` alone: traffic;
    `--trace`: trace), else `default` (None: constant users)."""
    if shape:
        return SHAPES.canonical(shape)
    if trace:
        return "trace"
    if target_rps is not None:
        return "open"
    if traffic:
        return "traffic"
    return default


def check_users(users: int | None, shape: str | None, *, word: Callable[[str], str] = lambda key: f"--{key}") -> None:
    """A user count beside a shape that decides the load is a contradiction (one line: `word(key)`
    names an option as the user wrote it: `--users`, `load.users`)."""
    if users is not None and shape in SHAPES_THAT_DECIDE_THE_LOAD:
        raise UsageError(f"{word('users')} conflicts with the {shape} shape: the shape decides the load; "
                         f"leave {word('users')} out")


def check_async_shape(shape: str | None, async_result: str) -> None:
    """The async shape judges the backlog of calls waiting for their results: it needs them to wait."""
    if shape == "async" and async_result == "none":
        raise UsageError("--shape async needs --async-result s3 or sqs:QUEUE_URL (and --async-input-location): "
                         "its backlog is the calls waiting for their results")


def default_run_time(shape: str | None, max_duration_s: float | None) -> str | None:
    """How long a run lasts when `-t` is not given: a minute without a shape or with the open shape
    (unless `--max-duration` stops it); a search or a pattern decides its own end."""
    if shape is None or (shape == "open" and not max_duration_s):
        return DEFAULT_RUN_TIME
    return None
