"""Locustfiles shipped with sm-locust. Pass their paths to `locust -f` (see `locustfiles/` in the
repo, or `python -m sm_locust.locustfiles` to print them); `sm-locust run` picks them for you.
Importing one registers its Locust listeners: import them only as locustfiles."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent


def path(name: str) -> str:
    """Filesystem path of a shipped locustfile (`sagemaker`, `step_shape`, ...)."""
    return str(HERE / f"{name}.py")
