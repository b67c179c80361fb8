"""What the sm-locust locustfile adds to Locust's own argument parser, beside the sm-locust options.

Locust reads the command line, `LOCUST_*` variables and config files (`./locust.conf`, ...) before
any sm-locust check runs. `guard_parser(parser)` makes Locust read its config files through
`util.yamlsafe.read_text_file` (a regular UTF-8 file, a BOM dropped, bounded) and checks Locust's
load options once parsed (`check_locust_load`: the bounds of `util.numbers`); a refusal is one line,
exit 2. Locust's first parser (looking for `-f`) reads the same files out of reach of any hook:
`check_config_files` is what `sm-locust run` checks before it starts Locust.

`cache_default_args` makes Locust's `default_args_dict()` (the names of Locust's own options) computed
once per process: a Locust worker calls it once per option the master sends, for every spawn message
(locust/runners.py, `WorkerRunner` "spawn"), a parser built and parsed each time; with sm-locust's
options that held a worker's gevent loop ~0.4 s per spawn message on an idle 2-core machine, seconds
on a loaded one (its heartbeats with it: docs/facts.md, "Locust").
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from sm_locust.errors import UsageError
from sm_locust.util.numbers import MAX_USERS, PROCESSES_PER_CORE, max_processes
from sm_locust.util.yamlsafe import read_text_file


def check_locust_load(options: object) -> None:
    """`--processes` and `--users` (Locust's own options, from wherever Locust read them) within this
    machine's bounds; a master spreads its users over workers, so its user count is not bounded here."""
    processes = getattr(options, "processes", None)
    if processes and processes > max_processes():
        raise UsageError(f"--processes must be at most {max_processes()} ({PROCESSES_PER_CORE} per core on this "
                         f"machine), got {processes}")
    users = getattr(options, "num_users", None)
    if users is not None and users > MAX_USERS and not getattr(options, "master", False):
        raise UsageError(f"--users must be at most {MAX_USERS:,} on one machine, got {users:,} (more users is a "
                         "distributed test: --master and --worker)")


LOCUST_CONFIG_FILES = ("~/.locust.conf", "locust.conf")  # Locust's DEFAULT_CONFIG_FILES but pyproject.toml


def check_config_files(environ: Mapping[str, str] | None = None) -> None:
    """The config files Locust will read in this folder (`LOCUST_CONFIG_FILES`, `$LOCUST_CONFIG`) are regular
    UTF-8 text files: `sm-locust run` checks them before it starts Locust, whose first parser (the one that
    finds `-f`, before any locustfile is imported) reads them too and ends in a traceback on binary bytes."""
    named = (environ if environ is not None else os.environ).get("LOCUST_CONFIG")
    for entry in (*LOCUST_CONFIG_FILES, *([named] if named else [])):
        path = Path(entry).expanduser()
        if os.path.lexists(path):
            read_text_file(path, f"Locust config file {entry}")


def open_config_file(path: str) -> io.StringIO:
    """A Locust config file's text, read as sm-locust reads every file a user names; else one line, exit 2."""
    try:
        stream = io.StringIO(read_text_file(path, f"Locust config file {path}"))
    except UsageError as exc:
        _quit(exc)
    stream.name = path  # configargparse names the file it read from
    return stream


def guard_parser(parser: Any) -> None:
    """Hook `open_config_file` and `check_locust_load` into Locust's parser (a configargparse parser)."""
    if hasattr(parser, "_config_file_open_func"):  # configargparse's hook for opening config files
        parser._config_file_open_func = open_config_file
    parse_args = parser.parse_args

    def checked_parse_args(*args: Any, **kwargs: Any) -> Any:
        options = parse_args(*args, **kwargs)
        try:
            check_locust_load(options)
        except UsageError as exc:
            _quit(exc)
        return options

    parser.parse_args = checked_parse_args


def cache_default_args(argument_parser: Any) -> None:
    """Replace `argument_parser.default_args_dict` (Locust's module) by one that computes it once and
    hands out copies (module doc). Its keys are Locust's own options, fixed in a process; Locust reads
    only the keys."""
    original = argument_parser.default_args_dict
    if getattr(original, "computed_once", False):
        return
    computed: dict[str, object] = {}

    def default_args_dict() -> dict[str, object]:
        if not computed:
            computed.update(original())
        return dict(computed)

    setattr(default_args_dict, "computed_once", True)  # noqa: B010  (a function's attribute, read above)
    argument_parser.default_args_dict = default_args_dict


def _quit(exc: UsageError) -> NoReturn:
    print(f"sm-locust: error: {exc.message}", file=sys.stderr, flush=True)
    raise SystemExit(exc.exit_code)
