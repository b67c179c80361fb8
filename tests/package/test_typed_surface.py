"""What moves between the layers stays typed: a ratchet on two counts read from the source with `ast`.

- The word `Any` in sm_locust/ (every whole-word occurrence, code or prose): at most `ANY_LIMIT`.
- Reads of summary.json's keys by string outside `record/`: a `x["key"]` subscript read or an
  `x.get("key")` call whose key is a key of one of the record's objects (taken from
  `record.model`'s dataclasses, so a new field counts at once). Writes (`x["key"] = ...`, dict
  literals) build JSON and are not reads. A module is counted when it could hold a summary.json object:
  it imports `sm_locust.record` or names a summary; the others read their own formats (a serializer's
  payload, a sweep file, timeline.jsonl, an endpoint's answer) whose keys merely share a name. A read
  from a pandas table (a name annotated `DataFrame` / `Series`, or assigned from `pd.` or from such a
  name) is a column of the report's tables, not summary.json, and is not counted either.
  The count is an upper bound: a dict built from the record (the report's capacity point, a sweep row)
  that is read back by key counts, as does any other object whose keys share a name with summary.json's.

Either count may only go down: lower the ratchet when it does.
"""

from __future__ import annotations

import ast
import inspect
import re
import statistics
from collections.abc import Iterator
from pathlib import Path

from sm_locust.record import model

PACKAGE = Path(__file__).resolve().parents[2] / "sm_locust"
ANY_LIMIT = 500  # issue's done-when figure
KEY_READS_DONE_WHEN = 60  # issue's done-when figure
KEY_READS_RATCHET = 59  # today's count: lower it as reads move onto the record's attributes
ANY_WORD = re.compile(r"\bAny\b")
TABLE_TYPE = re.compile(r"\b(DataFrame|Series)\b")


def _files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _where(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


def any_count(text: str) -> int:
    return len(ANY_WORD.findall(text))


def record_keys() -> frozenset[str]:
    """Every key of every object summary.json holds, from the record's dataclasses."""
    records = [c for c in vars(model).values()
               if inspect.isclass(c) and issubclass(c, model.Record) and c is not model.Record]
    return frozenset(key for record in records for key in record.json_spec())


def _root(node: ast.expr) -> str:
    """The name an expression starts from: `steps` for `steps.sort_values("users").iloc[0]`."""
    while isinstance(node, (ast.Call, ast.Attribute, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return ast.unparse(node)


def table_names(tree: ast.AST) -> set[str]:
    """Names (`steps`, `self.seconds`) that hold a pandas table: annotated `DataFrame` / `Series`, or
    assigned from `pd.` or from another such name."""
    names: set[str] = set()
    for node in ast.walk(tree):
        annotation = node.annotation if isinstance(node, (ast.arg, ast.AnnAssign)) else None
        if annotation is not None and TABLE_TYPE.search(ast.unparse(annotation)):
            names.add(node.arg if isinstance(node, ast.arg) else ast.unparse(node.target))
    grown = True
    while grown:
        grown = False
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, root = ast.unparse(node.targets[0]), _root(node.value)
                if (root == "pd" or root in names) and target not in names:
                    names.add(target)
                    grown = True
    return names


def key_reads(tree: ast.AST, keys: frozenset[str]) -> Iterator[tuple[int, str]]:
    """(line, key) of each read of one of `keys` by a constant string: `x["key"]` (not a store) or
    `x.get("key")`, `x` not a pandas table (`table_names`)."""
    tables = table_names(tree)
    for node in ast.walk(tree):
        key, holder = None, None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and isinstance(node.slice, ast.Constant):
            key, holder = node.slice.value, node.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args and isinstance(node.args[0], ast.Constant)):
            key, holder = node.args[0].value, node.func.value
        if isinstance(key, str) and key in keys and holder is not None and ast.unparse(holder) not in tables:
            yield node.lineno, key


def may_hold_summary(tree: ast.AST, text: str) -> bool:
    """Whether a module imports the record package or names a summary (else its keys are another format's)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sm_locust.record"):
            return True
        if isinstance(node, ast.Import) and any(a.name.startswith("sm_locust.record") for a in node.names):
            return True
    return "summary" in text


def _key_read_offenders() -> list[str]:
    keys = record_keys()
    found = []
    for path in _files():
        if path.relative_to(PACKAGE).parts[0] == "record":
            continue
        text = path.read_text()
        tree = ast.parse(text, filename=str(path))
        if may_hold_summary(tree, text):
            found += [f"{_where(path)}:{line} [{key!r}]" for line, key in key_reads(tree, keys)]
    return found


def test_the_any_counter_counts_whole_words():
    assert any_count("from typing import Any\ndef f(x: Any) -> dict[str, Any]: ...  # Any\n") == 4
    assert any_count("AnyStr Anything any _Any Any_") == 0


def test_the_key_set_comes_from_the_record():
    keys = record_keys()
    assert {"totals", "steps", "plateau", "p95_ms", "capacity_rps", "async", "from"} <= keys
    assert "async_" not in keys and "keys" not in keys and "extra" not in keys


def test_the_key_read_finder_sees_reads_not_writes():
    tree = ast.parse('a = s["p95_ms"]\nb = s.get("plateau", {})\ns["rps"] = 1\nd = {"rps": 2}\n'
                     'c = s["not_a_key"]\ne = s[name]\nf = g.get("totals")\n')
    assert list(key_reads(tree, record_keys())) == [(1, "p95_ms"), (2, "plateau"), (7, "totals")]


def test_a_pandas_table_s_columns_are_not_summary_reads():
    tree = ast.parse("def f(steps: pd.DataFrame, summary):\n    ordered = steps.sort_values('users')\n"
                     "    row = ordered.iloc[0]\n    frame = pd.DataFrame(rows)\n"
                     "    return ordered['rps'], row.get('p95_ms'), frame['users'], summary['rps']\n")
    assert table_names(tree) == {"steps", "ordered", "row", "frame"}
    assert list(key_reads(tree, record_keys())) == [(5, "rps")]


def test_a_module_that_never_meets_the_record_is_not_counted():
    plain = 'import json\ndef f(text):\n    return json.loads(text)["name"]\n'
    assert not may_hold_summary(ast.parse(plain), plain)
    imports = "from sm_locust.record.model import Summary\n"
    assert may_hold_summary(ast.parse(imports), imports)
    named = 'path = folder / "summary.json"\n'
    assert may_hold_summary(ast.parse(named), named)


def test_any_stays_within_its_limit():
    counts = {_where(path): n for path in _files() if (n := any_count(path.read_text()))}
    total = sum(counts.values())
    worst = sorted(counts.items(), key=lambda item: -item[1])[:15]
    assert total <= ANY_LIMIT, (f"`Any` appears {total} times in sm_locust/ (limit {ANY_LIMIT}): type it "
                                f"(TypedDict, Protocol, record.model's JsonObject / JsonValue); most in: {worst}")


def test_record_keys_read_by_string_only_go_down():
    found = _key_read_offenders()
    assert len(found) <= KEY_READS_RATCHET, (
        f"{len(found)} reads of summary.json keys by string outside record/ (ratchet {KEY_READS_RATCHET}): read "
        "the typed record's attributes (record.model: Summary.of(...).plateau, .percentile(p), .interval(name)) "
        "instead:\n" + "\n".join(found))


def test_record_keys_read_by_string_within_the_done_when_limit():
    found = _key_read_offenders()
    assert len(found) <= KEY_READS_DONE_WHEN, f"{len(found)} reads (limit {KEY_READS_DONE_WHEN}):\n" + "\n".join(found)


def test_module_docstrings_stay_short():
    """Issue 37's done-when: module docstrings say what and why in a median of 10 lines or fewer."""
    lengths = []
    for path in _files():
        doc = ast.get_docstring(ast.parse(path.read_text(), filename=str(path)), clean=False)
        if doc:
            lengths.append(len(doc.strip().splitlines()))
    assert lengths and statistics.median(lengths) <= 10, statistics.median(lengths)
