"""The one rule for a number a user gives: finite, of the right kind, in range, or one line naming it.

Why: `float("nan")` and `float("inf")` parse, and every comparison with nan is False, so a check
like `if value < 0` lets nan through: `--think-time nan` made every request hang, a nan price printed
"$nan per 1M", `--wait-timeout inf` never ended. Every numeric input (command-line options, sweep
files, web UI fields, SM_LOCUST_* variables) goes through `check_number`, whose message names the
option and the range: `--price-per-hour must be more than 0, got -1` (the sweep files' checker,
`sweep/validate.py`, words it the same way, from the same function).

The same rule as an argparse `type=` is `sm_locust.config.argtypes` (argparse stays in cli/ and config/).

`max_processes()` is the one bound on processes started on this machine (`run --processes`, `serve
--workers`): `PROCESSES_PER_CORE` per core. `run --processes 64` on 2 cores took 90 s and 3.8 GB and
sent nothing; each Locust worker or gunicorn worker is a Python process of 50-100 MB. `MAX_USERS` is
the one bound on the users one machine runs (`-u`, the shapes' user counts, open-loop tokens, the web
UI's user count): a user is a greenlet of about 20 KB (5,000 idle users: 145 MB RSS, measured), so
`-u 1000000000` would ask for 20 TB; more users than this is a distributed test (master and workers).
"""

from __future__ import annotations

import math
import os
from typing import Any

from sm_locust.errors import UsageError

Number = int | float
PROCESSES_PER_CORE = 4
MAX_USERS = 100_000  # users one machine runs: ~2 GB of greenlets


def max_processes() -> int:
    """The most processes one command starts on this machine: PROCESSES_PER_CORE per core."""
    return PROCESSES_PER_CORE * (os.cpu_count() or 1)


def number_problem(value: Any, cast: type = float, *, minimum: Number | None = None, maximum: Number | None = None,
                   above: Number | None = None, below: Number | None = None,
                   text: bool = True) -> tuple[Number | None, str | None]:
    """(the number, None) when `value` passes; (None, "must be at least 1, got 0") when it does not.

    The one wording: "must be a number" (or "a whole number", "a finite number"), "must be at least X",
    "must be more than X", "must be at most X", "must be less than X", each followed by ", got <value>".
    `text`: a string such as "5" is read as a number (command lines, environment variables, form
    fields); a sweep file's values are typed, so there "5" is refused."""
    kind = "a whole number" if cast is int else "a number"
    shown = f", got {value!r}"
    if isinstance(value, bool) or value is None or (isinstance(value, str) and not text):
        return None, f"must be {kind}{shown}"
    try:
        number: Number = float(value) if not isinstance(value, int) else value
    except (TypeError, ValueError, OverflowError):
        return None, f"must be {kind}{shown}"
    if isinstance(number, float) and not math.isfinite(number):
        return None, f"must be {'a whole' if cast is int else 'a finite'} number{shown}"
    if cast is int:
        if isinstance(value, str):
            try:
                number = int(value.strip())
            except ValueError:
                return None, f"must be {kind}{shown}"
        elif not float(number).is_integer():
            return None, f"must be {kind}{shown}"
        number = int(number)
    if minimum is not None and number < minimum:
        return None, f"must be at least {_bound(minimum)}{shown}"
    if above is not None and not number > above:
        return None, f"must be more than {_bound(above)}{shown}"
    if maximum is not None and number > maximum:
        return None, f"must be at most {_bound(maximum)}{shown}"
    if below is not None and not number < below:
        return None, f"must be less than {_bound(below)}{shown}"
    return number, None


def _bound(value: Number) -> str:
    """A range's end as a person reads it: 1,000,000 (not 1e+06), 0.5."""
    return f"{int(value):,}" if float(value).is_integer() and abs(value) < 1e15 else f"{value:g}"


def check_number(value: Any, name: str, cast: type = float, **bounds: Any) -> Number:
    """`value` as a finite `cast` within `bounds` (minimum, maximum, above, below), else a UsageError
    naming `name` (a flag, a sweep-file key)."""
    number, problem = number_problem(value, cast, **bounds)
    if problem is not None:
        raise UsageError(f"{name} {problem}")
    assert number is not None
    return number
