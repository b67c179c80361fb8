"""The package's public face: what `import sm_locust` offers, that it ships its type information,
and the layout rules of issue 27 (few loose modules at the root; only the entry point imports cli/).

A change to the public names is a change users see: this test pins them, so it is made on purpose
(and written in CHANGELOG.md), never by accident.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import sm_locust

PACKAGE = Path(sm_locust.__file__).resolve().parent
ROOT = PACKAGE.parent

PUBLIC = {
    "__version__", "sweep", "run", "load", "RunResult", "compare", "SweepResult", "LocalEndpoint",
    "SmLocustError", "UsageError", "RunError", "SageMakerUser", "FastSageMakerUser", "create_client",
    "SageMakerClient", "FastSageMakerClient", "Boto3SageMakerClient", "Invocation", "InvocationError",
}
MAX_LOOSE_MODULES = 8


def test_the_public_names_are_pinned():
    assert set(sm_locust.__all__) == PUBLIC and len(sm_locust.__all__) == len(PUBLIC)
    assert set(sm_locust.__all__) - {"__version__", "sweep"} == set(sm_locust._LAZY)


def test_every_public_name_resolves_and_the_type_checking_imports_mirror_them():
    for name in PUBLIC - {"__version__"}:
        assert getattr(sm_locust, name) is not None, name
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    checked = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom):
                    checked |= {alias.asname or alias.name for alias in stmt.names}
    defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")}
    assert defined == {"sweep"}  # a plain function, written in __init__.py (the rest load lazily)
    assert checked == PUBLIC - {"__version__"} - defined


@pytest.mark.e2e
def test_importing_the_package_loads_nothing_heavy():
    code = ("import sys, sm_locust\n"
            "print(sorted(m for m in ('locust', 'gevent', 'boto3', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_the_package_ships_its_type_information():
    assert (PACKAGE / "py.typed").is_file()
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"py.typed"' in pyproject.split("[tool.setuptools.package-data]", 1)[1].split("\n[", 1)[0]


def test_the_root_has_few_loose_modules():
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(loose) <= MAX_LOOSE_MODULES, loose


def test_only_the_entry_point_imports_the_command_line():
    importers = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        module = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        if module.startswith("sm_locust.cli") or module == "sm_locust.__main__":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "sm_locust.cli" or n.startswith("sm_locust.cli.") for n in names):
                importers.append(module)
    assert not importers, importers
