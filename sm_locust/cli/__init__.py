"""The `sm-locust` command.

Each sub-command module provides `add_parser(subparsers)` and `run(args) -> int`; `cli/commands.py`
is the table of commands, and only the chosen command's module is imported (`report` never imports
Locust, `serve` never imports pandas). `SmLocustError`s print as one line and exit with their code;
usage errors exit 2. SIGINT raises KeyboardInterrupt and SIGTERM `Terminated`, so every `with` /
`finally` stops what the command started; while Locust runs as a child, `core.child` forwards the
signal and raises `Interrupted` once Locust has written its results. Exit 130 / 143.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import signal
import sys
import threading
from typing import NoReturn

from sm_locust import __version__
from sm_locust.cli.commands import COMMANDS
from sm_locust.config.argtypes import register_number_types
from sm_locust.errors import Interrupted, SmLocustError
from sm_locust.sanitize import TerminalStream


class CommandParser(argparse.ArgumentParser):
    """The parser of every command: finite numbers only, and a bad argument is one line, exit 2. The
    Python API (sm_locust/api/options.py) subclasses it to raise that line instead of exiting."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        register_number_types(self)  # type=float / type=int: finite only, one message (sm_locust.util.numbers)

    def error(self, message: str) -> NoReturn:  # one line, exit 2, no usage dump
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser with command `only`'s full sub-parser (its module imported); every other command
    gets a placeholder carrying its help line, so `--help` lists them all without importing them."""
    parser = CommandParser(prog="sm-locust", description="Load-test Amazon SageMaker inference endpoints with Locust.")
    parser.add_argument("--version", action="version", version=f"sm-locust {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=CommandParser)
    sub.required = True
    for name, command in COMMANDS.items():
        if name == only:
            command.load().add_parser(sub)
        else:
            sub.add_parser(name, help=command.help, add_help=False)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl+C's KeyboardInterrupt (see the module docstring)."""


def _raise_terminated(_signum, _frame) -> None:
    raise Terminated()


# A file system that refused mid-way (outputs are checked before the work starts, but a disk fills up,
# a mount goes read-only): one line naming the file, not a traceback.
FILE_SYSTEM_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO,
                                errno.EFBIG, errno.ENAMETOOLONG, errno.EISDIR, errno.ENOTDIR, errno.ELOOP})
# ... of which these say the name the user gave cannot be a path at all: bad input (exit 2), not a failed run
NAME_ERRORS = frozenset({errno.ENAMETOOLONG, errno.ELOOP})


def file_system_error(exc: OSError) -> str:
    """'full/rep/report.html: No space left on device (free some space ...)'"""
    name = str(exc.filename) if exc.filename else ""
    where = f"{name[:80]}{'...' if len(name) > 80 else ''}: " if name else ""
    hint = " (free some space and run again)" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else ""
    return f"{where}{exc.strerror or exc}{hint}"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if in_main_thread else None
    streams = sys.stdout, sys.stderr
    if in_main_thread:  # every name a command echoes (a run folder, a sweep's value) reaches the terminal inert
        sys.stdout, sys.stderr = TerminalStream(sys.stdout), TerminalStream(sys.stderr)
    try:
        return _main(argv)
    except Interrupted as exc:  # Locust stopped and wrote what it measured
        print(f"sm-locust: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except SmLocustError as exc:
        print(f"sm-locust: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except Terminated:
        print("sm-locust: terminated (SIGTERM)", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print("sm-locust: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT
    except BrokenPipeError:  # `sm-locust sweep ... --plan | head`: the reader left; say nothing more
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except OSError as exc:
        if exc.errno not in FILE_SYSTEM_ERRORS:
            raise
        print(f"sm-locust: error: {file_system_error(exc)}", file=sys.stderr)
        return 2 if exc.errno in NAME_ERRORS else 1
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
            sys.stdout, sys.stderr = streams


def _main(argv: list[str]) -> int:
    passthrough: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, passthrough = argv[:cut], argv[cut + 1:]
    command = next((a for a in argv if not a.startswith("-")), None)
    only = command if command in COMMANDS else None
    parser = build_parser(only)
    args, extra = parser.parse_known_args(argv)
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if passthrough and not getattr(args, "accepts_passthrough", False):
        parser.error(f"'sm-locust {args.command}' takes no arguments after --")
    args.passthrough = passthrough
    return int(COMMANDS[args.command].load().run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
