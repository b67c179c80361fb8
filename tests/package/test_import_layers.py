"""The package's import graph has no cycles, between modules or between packages.

Read from the source with `ast` (every import statement, including those inside functions, which
only postpone a cycle to run time), not by importing anything. A cycle means two concerns that
cannot be understood, tested or moved apart; the fix is to move the shared thing down a layer.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "sm_locust"
ROOT = "sm_locust"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The sm_locust modules `name` imports, resolved to modules that exist."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def resolve(target: str) -> str | None:
        while target and target not in known:
            target = target.rpartition(".")[0]
        return target or None

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == ROOT:
                    found.add(resolve(alias.name))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.split(".")[0] != ROOT:
                return
            for alias in node.names:  # `from pkg import submodule` imports the submodule
                candidate = f"{module}.{alias.name}"
                found.add(candidate if candidate in known else resolve(module))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    found.discard(None)
    found.discard(name)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strongconnect(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return out


def _package_of(module: str) -> str:
    """`sm_locust.transport.fast` -> `transport`; a root module (`sm_locust.errors`) is its own unit."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT


def _package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for module, targets in graph.items():
        if module == ROOT:  # the package's lazy __init__ re-exports, it is nobody's dependency
            continue
        source = _package_of(module)
        for target in targets:
            if target != ROOT and _package_of(target) != source:
                out.setdefault(source, set()).add(_package_of(target))
    return out


def test_the_graph_reader_sees_a_known_import():
    graph = _graph()
    assert "sm_locust.errors" in graph["sm_locust.util.registry"]


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_between_modules():
    cycles = _cycles(_graph())
    assert not cycles, "import cycles between modules: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_no_import_cycles_between_packages():
    cycles = _cycles(_package_graph(_graph()))
    assert not cycles, "import cycles between packages: " + "; ".join(" <-> ".join(c) for c in cycles)


@pytest.mark.parametrize("module", sorted(_modules()))
def test_every_module_has_a_docstring(module):
    path = _modules()[module]
    if path.name == "__init__.py" and not path.read_text().strip():
        pytest.skip("empty package marker")
    assert ast.get_docstring(ast.parse(path.read_text())), f"{path} has no module docstring saying why it exists"


# -------------------------------------------------------------------------- function-level imports

LAZY_MARK = "# lazy:"
MAX_FUNCTION_LEVEL_IMPORTS = 60


def _imports_in_functions(tree: ast.AST) -> list[ast.stmt]:
    found: list[ast.stmt] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append(child)
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    visit(tree, False)
    return found


def _function_level_imports() -> list[tuple[Path, ast.stmt, list[str]]]:
    """(file, import statement, the file's lines) for every import inside a function of the package."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        lines = text.splitlines()
        found += [(path, node, lines) for node in _imports_in_functions(ast.parse(text, filename=str(path)))]
    return found


def _says_why(node: ast.stmt, lines: list[str]) -> bool:
    """The import's line carries `# lazy: why`, or the comment block above its run of imports does."""
    if LAZY_MARK in lines[node.lineno - 1]:
        return True
    i = node.lineno - 2
    while i >= 0:  # up through the imports (and blank lines) of the same run ...
        line = lines[i].strip()
        if line.startswith(("import ", "from ")) or line == "" or line.startswith("try:"):
            if LAZY_MARK in line:
                return True
            i -= 1
            continue
        break
    while i >= 0 and lines[i].strip().startswith("#"):  # ... to the comment block above it
        if LAZY_MARK in lines[i]:
            return True
        i -= 1
    return False


def test_the_lazy_import_checker_reads_comments_on_the_line_and_above():
    code = ("def f():\n    import a  # lazy: a is optional\n\n"
            "def g():\n    # lazy: b costs 1 s to import,\n    # measured\n    import b\n    from b import c\n\n"
            "def h():\n    import d\n")
    lines = code.splitlines()
    nodes = [n for n in ast.walk(ast.parse(code)) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert [_says_why(n, lines) for n in sorted(nodes, key=lambda n: n.lineno)] == [True, True, True, False]


def test_every_function_level_import_says_why_it_is_not_at_the_top():
    """Command modules and the rest import at their top (cli/commands.py loads only the chosen
    command); an import stays inside a function only for a heavy optional dependency or a measured
    start-up cost, and then it says which (`# lazy: ...`), so the number cannot creep back."""
    imports = _function_level_imports()
    silent = [f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {lines[node.lineno - 1].strip()}"
              for path, node, lines in imports if not _says_why(node, lines)]
    assert not silent, "function-level imports without a '# lazy: why' comment:\n" + "\n".join(silent)
    assert len(imports) <= MAX_FUNCTION_LEVEL_IMPORTS, f"{len(imports)} function-level imports"


# -------------------------------------------------------------------------------- settings classes


def _option_providers() -> set[str]:
    """The modules `sm_locust.config.options.OPTION_PROVIDERS` names (read from the source)."""
    tree = ast.parse((PACKAGE / "config" / "options.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "OPTION_PROVIDERS":
            return {ast.literal_eval(e)[0].partition(":")[0] for e in node.value.elts}
    raise AssertionError("sm_locust/config/options.py has no OPTION_PROVIDERS")


def test_a_settings_class_lives_with_the_options_it_reads():
    """docs/ARCHITECTURE.md's rule: the typed view of a feature's options (a class with
    `from_options`, or a `*_settings(options)` function) is in the module that declares them."""
    providers = _option_providers()
    misplaced = []
    for name, path in _modules().items():
        for node in ast.parse(path.read_text()).body:
            reads = (isinstance(node, ast.ClassDef) and any(
                isinstance(f, ast.FunctionDef) and f.name == "from_options" for f in node.body)) or (
                isinstance(node, ast.FunctionDef) and node.name.endswith("_settings")
                and [a.arg for a in node.args.args][:1] == ["options"])
            if reads and name not in providers:
                misplaced.append(f"{name}.{node.name}")
    assert not misplaced, f"settings outside the module that declares their options: {misplaced}"


def test_no_module_imports_a_private_name_of_another():
    """`_name` is a module's own: what two modules share gets a public name in the lower one. A
    package may import its own private submodule (`locustfiles._webui`: Locust skips `_` files
    when it loads a folder of locustfiles)."""
    modules = _modules()
    found = []
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith(ROOT) or node.level:
                continue
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                own_submodule = (f"{node.module}.{alias.name}" in modules
                                 and name.rpartition(".")[0] == node.module)
                if private and not own_submodule:
                    found.append(f"{name}: from {node.module} import {alias.name}")
    assert not found, "private names imported across modules: " + "; ".join(found)


# ------------------------------------------------------------------------- modules named by text

NAMED = re.compile(r"^(sm_locust(?:\.\w+)+)(?::\w+)?$")  # "sm_locust.x.y" or "sm_locust.x.y:name"
# Registries that still name, in text, modules that import them back: a cycle no import statement
# shows. The list only shrinks (the last test fails on an entry that no longer does it).
NAMES_BACK_UP = {"sm_locust.config.options", "sm_locust.sweep.deployers"}


def _named(path: Path, known: set[str]) -> set[str]:
    """The sm_locust modules a module's string constants name (an importlib target, a registry's entry)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        match = NAMED.match(node.value) if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
        target = match.group(1) if match else ""
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target:
            found.add(target)
    return found


def _reaches(graph: dict[str, set[str]], source: str, target: str) -> bool:
    seen, stack = set(), [source]
    while stack:
        module = stack.pop()
        if module == target:
            return True
        if module not in seen:
            seen.add(module)
            stack.extend(graph.get(module, ()))
    return False


def _named_back_up() -> set[tuple[str, str]]:
    graph, modules = _graph(), _modules()
    return {(name, target) for name, path in modules.items() for target in _named(path, set(modules))
            if target != name and _reaches(graph, target, name)}


def test_the_text_reader_finds_a_named_module_that_imports_back():
    graph = {"pkg.registry": set(), "pkg.kind": {"pkg.registry"}, "pkg.top": {"pkg.kind"}}
    assert _reaches(graph, "pkg.kind", "pkg.registry") and not _reaches(graph, "pkg.registry", "pkg.kind")
    assert NAMED.match("sm_locust.sweep.realtime.sweep:load") and not NAMED.match("sm_locust run")


def test_no_module_names_in_text_a_module_that_imports_it():
    """A registry that names its entries' code by string ("module:function", imported later) hides an
    import from the statements: when that code imports the registry back, it is a cycle all the same.
    A registry sits below the code it lists only if it does not name it: the code is named above it
    (sweep/api.py's LOADERS over sweep/kinds.py)."""
    found = _named_back_up()
    hidden = sorted(f"{name} -> {target}" for name, target in found if name not in NAMES_BACK_UP)
    assert not hidden, "modules named in text that import the namer back: " + ", ".join(hidden)
    assert {name for name, _ in found} == NAMES_BACK_UP, "remove the registries that no longer do it"
