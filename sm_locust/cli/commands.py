"""The table of `sm-locust` commands: name -> the module under `sm_locust.cli` that implements it,
and its one-line help.

The table lives apart from the command modules so that `sm-locust --help` lists every command with
its help line without importing any of them. A command's module is imported only when that
command is chosen, so each module imports what its work needs at its top, and a command never pays
for another's dependencies (`sm-locust serve` never loads pandas, `sm-locust report` never
Locust: tests/cli/test_cli_startup.py checks both).
"""

from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class Command:
    name: str
    module: str  # under sm_locust.cli: provides add_parser(subparsers) and run(args) -> int
    help: str  # the line `sm-locust --help` shows

    def load(self) -> ModuleType:
        return importlib.import_module(f"sm_locust.cli.{self.module}")


# The order is the order `sm-locust --help` lists them.
COMMANDS: dict[str, Command] = {c.name: c for c in (
    Command("serve", "serve", "run the local SageMaker-compatible endpoint (runtime API + container contract)"),
    Command("run", "run", "run a headless load test and write a run folder"),
    Command("demo", "demo", "start the local endpoint, run a ~1 minute step load against it, write the run folder "
            "and report"),
    Command("report", "report", "build report.html, merged CSVs and cost figures from a run folder"),
    Command("compare", "compare", "compare run folders side by side (compare.html + compare.csv)"),
    Command("smoke", "smoke", "a short load test (or an existing run folder) checked against pass/fail gates, for CI"),
    Command("sweep", "sweep", "deploy and load-test every configuration of a sweep file; recommend the cheapest "
            "that meets the SLO"),
)}


def add_command_parser(subparsers: Any, name: str, **kwargs: Any) -> argparse.ArgumentParser:
    """Command `name`'s sub-parser, with its help line from the table (each module's add_parser calls this)."""
    return subparsers.add_parser(name, help=COMMANDS[name].help, **kwargs)
