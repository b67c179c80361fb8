"""The one rule for a number a user gives: finite, of the right kind, in range, or one line naming it.

Why: `float("nan")` and `float("inf")` parse, and every comparison with nan is False, so a check
like `if value < 0` lets nan through: `--think-time nan` made every request hang, a nan price printed
"$nan per 1M", `--wait-timeout inf` never ended. Every numeric input (command-line options, sweep
files, web UI fields, SM_LOCUST_* variables) goes through `check_number`, whose message names the
option and the range: `--price-per-hour must be a number above 0, got -1`.

`argument_type` is the same rule as an argparse `type=`; `register_number_types(parser)` makes a
parser's plain `type=float` / `type=int` use it (finite, whole for int), so no option of any command
accepts nan or inf, including options added later.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

from sm_locust.errors import UsageError

Number = int | float


def range_text(cast: type = float, *, minimum: Number | None = None, maximum: Number | None = None,
               above: Number | None = None, below: Number | None = None) -> str:
    """'a whole number from 1 to 10', 'a number above 0', 'a finite number'."""
    kind = "a whole number" if cast is int else "a number"
    low = f"{minimum:g}" if minimum is not None else None
    high = f"{maximum:g}" if maximum is not None else None
    if low is not None and high is not None:
        return f"{kind} from {low} to {high}"
    parts = []
    if minimum is not None:
        parts.append(f"at least {low}")
    if above is not None:
        parts.append(f"above {above:g}")
    if maximum is not None:
        parts.append(f"at most {high}")
    if below is not None:
        parts.append(f"below {below:g}")
    if not parts:
        return "a finite number" if cast is float else kind
    return f"{kind} {' and '.join(parts)}"


def number_problem(value: Any, cast: type = float, *, minimum: Number | None = None, maximum: Number | None = None,
                   above: Number | None = None, below: Number | None = None) -> tuple[Number | None, str | None]:
    """(the number, None) when `value` passes; (None, 'must be ..., got ...') when it does not."""
    wanted = range_text(cast, minimum=minimum, maximum=maximum, above=above, below=below)
    if isinstance(value, bool) or value is None:
        return None, f"must be {wanted}, got {value!r}"
    try:
        number = float(value) if not isinstance(value, int) else value
    except (TypeError, ValueError, OverflowError):
        return None, f"must be {wanted}, got {value!r}"
    if isinstance(number, float) and not math.isfinite(number):
        finite = "" if "finite" in wanted or cast is int else " (finite)"
        return None, f"must be {wanted}{finite}, got {value!r}"
    if cast is int:
        if isinstance(value, str):
            try:
                number = int(value.strip())
            except ValueError:
                return None, f"must be {wanted}, got {value!r}"
        elif not float(number).is_integer():
            return None, f"must be {wanted}, got {value!r}"
        number = int(number)
    if ((minimum is not None and number < minimum) or (maximum is not None and number > maximum)
            or (above is not None and not number > above) or (below is not None and not number < below)):
        return None, f"must be {wanted}, got {value!r}"
    return number, None


def check_number(value: Any, name: str, cast: type = float, **bounds: Number | None) -> Number:
    """`value` as a finite `cast` within `bounds` (minimum, maximum, above, below), else a UsageError
    naming `name` (a flag, a sweep-file key)."""
    number, problem = number_problem(value, cast, **bounds)
    if problem is not None:
        raise UsageError(f"{name} {problem}")
    assert number is not None
    return number


class NumberArgumentError(argparse.ArgumentTypeError, ValueError):
    """argparse prints its text after "argument --flag:"; callers of the type function catch a ValueError."""


def argument_type(cast: type = float, **bounds: Number | None) -> Callable[[str], Number]:
    """An argparse `type=` applying the rule: `--x nan` -> "argument --x: must be a finite number, got 'nan'"."""

    def parse(text: str) -> Number:
        number, problem = number_problem(text, cast, **bounds)
        if problem is not None:
            raise NumberArgumentError(problem)
        assert number is not None
        return number

    parse.__name__ = cast.__name__  # argparse names the type in some messages
    return parse


def register_number_types(parser: argparse.ArgumentParser) -> None:
    """Make this parser's (and its argument groups') `type=float` / `type=int` refuse nan and inf."""
    parser.register("type", float, argument_type(float))
    parser.register("type", int, argument_type(int))
