"""Errors sm-locust raises on purpose, and the exit codes they map to.

Every error a user can cause (a bad option, an unreadable file, an unknown serializer name) is a
subclass of `SmLocustError`, carries a one-line message that says what is wrong and how to fix it,
and knows its process exit code: 2 for usage errors, 1 for a run that failed, 128 + the signal's
number for a command stopped by SIGINT (130) or SIGTERM (143). The CLI prints
`sm-locust: error: <message>` and exits with that code; it never shows a traceback for these, and
neither does a notebook (the Python API raises them as they are: `_render_traceback_`). The message
is sanitised once, here (`sm_locust.sanitize.clean`): whatever file or endpoint text it quotes,
it reaches a terminal as one bounded line without terminal controls.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sm_locust.sanitize import clean


class SmLocustError(Exception):
    """Base error: one line of text for the user plus an exit code."""

    exit_code = 1

    def __init__(self, message: str):
        message = clean(message)  # it may quote a file or an endpoint: no terminal controls, one bounded line
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message

    def _render_traceback_(self) -> list[str]:
        """What IPython / Jupyter show instead of a traceback (their hook): the one line, as the CLI
        prints it, so a bad option in a notebook cell reads like the command's error."""
        return [f"{type(self).__name__}: {self.message}"]


class UsageError(SmLocustError):
    """The user asked for something impossible or malformed (exit code 2)."""

    exit_code = 2


class RunError(SmLocustError):
    """The run could not be started or did not complete (exit code 1)."""

    exit_code = 1


class UnknownNameError(UsageError):
    """A registry was asked for a name it does not hold; the message lists the valid names."""

    def __init__(self, kind: str, name: str, valid: Iterable[str]):
        self.kind = kind
        self.name = name
        self.valid = sorted(valid)
        super().__init__(f"unknown {kind} {name!r}; choose one of: {', '.join(self.valid)}")


class Interrupted(SmLocustError):
    """A signal stopped the command after its children were stopped and its results written
    (exit code 128 + the signal's number: 130 for SIGINT, 143 for SIGTERM)."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.signum = signum
        self.exit_code = 128 + signum


def aws_error(exc: BaseException) -> tuple[str, str] | None:
    """(code, message) of an AWS API error (a botocore ClientError or anything carrying its parsed
    `response`), None for any other exception. The one reading of botocore's error shape for the
    control-plane code (sweeps, scaling, checks); the runtime transports count failures in
    `transport/errors.py`."""
    response = getattr(exc, "response", None)
    if not isinstance(response, Mapping):
        return None
    err = response.get("Error") or {}
    return str(err.get("Code") or type(exc).__name__), str(err.get("Message") or exc)
