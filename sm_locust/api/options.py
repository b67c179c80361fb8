"""Keyword arguments -> the options of `sm-locust run`, through the CLI's own parser.

`sm_locust.run(users=8, latency_slo_ms=200, shape="plateau")` must mean exactly
`sm-locust run --users 8 --latency-slo-ms 200 --shape plateau`: the same defaults (including the
`SM_LOCUST_*` environment variables), the same conversions and the same one-line errors. So the
keywords are not checked here against a second list: each becomes its command-line flag and a
parser with the `run` command's arguments (`sm_locust.core.arguments.add_run_arguments`, whatever
options it declares today) parses them. Its refusals are raised as `UsageError` with argparse's
own line; a keyword that names no option gets the closest option names.

Values: a number or a string is written as the flag's text (`users=8` -> `--users=8`); a switch
(`overwrite=True`) is given or not; `True` / `False` for an option that takes a value become
`true` / `false` (the options' one boolean parser); a list for a repeatable option repeats the flag;
a dict or list for any other option is written as JSON (`traffic_pattern={...}`); None means "not
given" (the default applies).
"""

from __future__ import annotations

import argparse
import difflib
import json
from collections.abc import Iterable, Mapping
from pathlib import PurePath
from typing import Any, NoReturn

from sm_locust.core.arguments import add_run_arguments
from sm_locust.errors import UsageError
from sm_locust.util.numbers import register_number_types


class _Refusing(argparse.ArgumentParser):
    """The commands' number rule (finite numbers only), raising the one-line UsageError instead of exiting."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        register_number_types(self)

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def run_parser() -> argparse.ArgumentParser:
    """A parser of `sm-locust run`'s arguments, as the CLI declares them (its options and their defaults)."""
    parser = _Refusing(prog="sm-locust run", add_help=False)
    add_run_arguments(parser)
    return parser


def option_actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """dest -> its argparse action, for every option (flagged argument) of `parser`."""
    # argparse lists a parser's arguments only in `_actions` (no public accessor): read, never changed.
    return {a.dest: a for a in parser._actions if a.option_strings and a.dest != argparse.SUPPRESS}


# A repeatable option (`action="append"`): argparse names its class only privately; read, never subclassed.
_APPEND = argparse._AppendAction


def _flag(action: argparse.Action) -> str:
    long = [s for s in action.option_strings if s.startswith("--")]
    return (long or action.option_strings)[0]


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float, PurePath)):
        return str(value)
    if isinstance(value, (Mapping, list, tuple)):
        return json.dumps(value)
    raise TypeError(type(value).__name__)


def argv_for(name: str, value: Any, action: argparse.Action) -> list[str]:
    """The command-line words for one keyword argument (`users`, 8 -> ["--users=8"])."""
    flag = _flag(action)
    if action.nargs == 0:  # a switch: store_true / store_false / BooleanOptionalAction
        if not isinstance(value, bool):
            raise UsageError(f"{name}= is a switch ({flag}): pass True or False, got {value!r}")
        if isinstance(action, argparse.BooleanOptionalAction):
            return [flag if value else f"--no-{flag[2:]}"]
        if value == action.default:
            return []
        if value == action.const:
            return [flag]
        raise UsageError(f"{name}={value!r} cannot be given as {flag}")
    repeated = isinstance(action, _APPEND) or action.nargs in ("+", "*") or isinstance(action.nargs, int)
    values = list(value) if repeated and isinstance(value, (list, tuple)) else [value]
    words: list[str] = []
    for item in values:
        try:
            text = _text(item)
        except TypeError as exc:
            raise UsageError(f"{name}= takes a number, text or True/False ({flag}), got a {exc}") from None
        words.append(f"{flag}={text}")
    if not isinstance(action, _APPEND) and len(words) > 1:  # nargs="+": one flag, several values
        return [words[0], *(_text(item) for item in values[1:])]
    return words


def run_arguments(options: Mapping[str, Any], locust_args: Iterable[str] | None = None) -> argparse.Namespace:
    """The parsed `sm-locust run` options for these keyword arguments (None = not given), as the CLI
    parses them; UsageError for a name that is no option or a value the option refuses."""
    parser = run_parser()
    actions = option_actions(parser)
    argv: list[str] = []
    for name, value in options.items():
        if value is None:
            continue
        action = actions.get(name)
        if action is None:
            raise UsageError(unknown_option(name, actions))
        argv += argv_for(name, value, action)
    args = parser.parse_args(argv)
    args.command = "run"
    args.accepts_passthrough = True  # as the `run` command's parser says (locust_args are its passthrough)
    if isinstance(locust_args, (str, bytes)) or not (locust_args is None or isinstance(locust_args, Iterable)):
        raise UsageError(f"locust_args= takes a list of Locust's arguments, e.g. ['--stop-timeout', '5'], not "
                         f"{type(locust_args).__name__} {locust_args!r}")
    args.passthrough = [str(a) for a in locust_args or []]
    return args


def unknown_option(name: str, actions: Mapping[str, argparse.Action]) -> str:
    """`unknown option 'user'=: did you mean users? ...` (close names first)."""
    close = difflib.get_close_matches(name, list(actions), n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    return (f"unknown option {name}=: {hint}the keywords are the options of `sm-locust run` with underscores "
            "(see `sm-locust run --help`)")

