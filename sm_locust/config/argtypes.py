"""The number rule (`sm_locust.util.numbers.number_problem`: finite, of the right kind, in range) as
argparse types: `argument_type` for one option's `type=`, and `register_number_types(parser)` so a
parser's plain `type=float` / `type=int` refuses nan and inf, including options added later."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from sm_locust.util.numbers import Number, number_problem


class NumberArgumentError(argparse.ArgumentTypeError, ValueError):
    """argparse prints its text after "argument --flag:"; callers of the type function catch a ValueError."""


def argument_type(cast: type = float, **bounds: Any) -> Callable[[str], Number]:
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
