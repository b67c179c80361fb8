"""A command line's namespace stays in `cli/`: argparse is imported only by `cli/` and `config/`, a
command hands the layers below a mapping or typed settings (never its namespace), and the one
conversion below them (`config.options.option_value`) refuses a namespace.

Read from the source with `ast` where it can be; the refusal is called.
"""

from __future__ import annotations

import argparse
import ast
import builtins
from pathlib import Path

import pytest

from sm_locust.config.options import option_value, parse_options, parse_specs
from sm_locust.core.arguments import RUN_OPTIONS, RunArguments
from sm_locust.gates.cli import GateSettings
from sm_locust.report.options import CompareSettings
from sm_locust.report.pipeline import ReportOptions

PACKAGE = Path(__file__).resolve().parents[2] / "sm_locust"
ARGPARSE_HOMES = ("cli", "config")
NAMESPACE_NAMES = ("args", "namespace")  # what a command calls its parsed command line


def _files(under: Path = PACKAGE) -> list[Path]:
    return sorted(under.rglob("*.py"))


def _top(path: Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else ""


def _argparse_imports(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "argparse" for a in node.names):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "argparse":
            lines.append(node.lineno)
    return lines


def test_the_import_finder_sees_both_forms():
    tree = ast.parse("import argparse\ndef f():\n    from argparse import Namespace\nimport os\n")
    assert _argparse_imports(tree) == [1, 3]


def test_argparse_is_imported_only_in_cli_and_config():
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}" for path in _files() if _top(path) not in ARGPARSE_HOMES
             for line in _argparse_imports(ast.parse(path.read_text()))]
    assert not found, "argparse imported outside cli/ and config/: " + ", ".join(found)


def _cli_names(tree: ast.Module) -> set[str]:
    """Names a cli module may hand its namespace to: its own functions and what it imports from cli/."""
    names = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sm_locust.cli"):
            names |= {alias.asname or alias.name for alias in node.names}
    return names


def _namespace_handed_down(source: str) -> list[str]:
    """`callee(line)` for each call in a function that passes the function's namespace parameter
    (`args`, `namespace`) to anything but a builtin or a function of cli/ itself."""
    tree = ast.parse(source)
    allowed = _cli_names(tree) | set(dir(builtins))
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        params = {a.arg for a in (*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs)}
        held = params & set(NAMESPACE_NAMES)
        for call in ast.walk(function):
            if not isinstance(call, ast.Call):
                continue
            passed = [*call.args, *(k.value for k in call.keywords)]
            if not any(isinstance(a, ast.Name) and a.id in held for a in passed):
                continue
            callee = call.func
            root = callee
            while isinstance(root, ast.Attribute):  # `Settings.parse(args)`: the class decides
                root = root.value
            if isinstance(root, ast.Name) and root.id in allowed:
                continue
            found.append(f"{ast.unparse(callee)}:{call.lineno}")
    return found


def test_the_hand_down_finder_tells_a_mapping_from_the_namespace():
    code = ("from sm_locust.cli.x import helper\nfrom sm_locust.gates.cli import GateSettings\n"
            "def local(args):\n    return args\nclass Own:\n    pass\n"
            "def run(args):\n    local(args)\n    helper(args)\n    vars(args)\n"
            "    Own.parse(args)\n    GateSettings.parse(vars(args))\n    GateSettings.parse(args)\n"
            "    parse(source=args)\n")
    assert _namespace_handed_down(code) == ["GateSettings.parse:13", "parse:14"]


def test_no_command_hands_its_namespace_below_cli():
    """The layers below read a mapping (`vars(args)`) or typed settings: `RunArguments`, `GateSettings`,
    `ReportOptions`, ... parse it by their specs; nothing below cli/ takes the command line's namespace."""
    found = [f"{path.relative_to(PACKAGE.parent)}: {call}" for path in _files(PACKAGE / "cli")
             for call in _namespace_handed_down(path.read_text())]
    assert not found, "a command's namespace handed below cli/: " + ", ".join(found)


NAMESPACE = argparse.Namespace(endpoint_name="ep", max_p95_ms=["100"], target_rps=5.0)


@pytest.mark.parametrize("parse", [
    lambda source: option_value(source, "endpoint_name"),
    parse_options,
    lambda source: parse_specs(RUN_OPTIONS, source),
    RunArguments.parse,
    GateSettings.parse,
    ReportOptions.parse,
    CompareSettings.parse,
], ids=["option_value", "parse_options", "parse_specs", "RunArguments", "GateSettings", "ReportOptions",
        "CompareSettings"])
def test_the_parsers_below_cli_refuse_a_namespace(parse):
    with pytest.raises(TypeError, match="mapping"):
        parse(NAMESPACE)


def test_the_parsers_take_the_same_values_as_a_mapping():
    assert GateSettings.parse(vars(NAMESPACE)).max_p95_ms == ("100",)
    assert parse_options(vars(NAMESPACE)).endpoint_name == "ep"
    assert option_value({"endpoint_name": ""}, "endpoint_name") is None
