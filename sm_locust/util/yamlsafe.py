"""The one way sm-locust reads YAML (sweep files, `--traffic`, `--set` values) and the JSON a user hands in
(run folders, price tables): bounded and quiet.

`yaml.safe_load` refuses code, not size (docs/facts.md, "Reading untrusted files"). `read_text_file`
reads a regular file of at most `limit` bytes, UTF-8 with or without a BOM. `load_yaml` composes the
node graph and counts the values it stands for with every alias expanded, without expanding
anything: more than `MAX_YAML_VALUES`, a cycle or nesting deeper than `MAX_YAML_DEPTH` is refused
before a Python object is built. Every refusal is one `UsageError` naming the source, the line and
the rule, never the value. `load_json` turns nesting too deep for Python's parser into the
`JSONDecodeError` it is.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import yaml

from sm_locust.errors import UsageError

MAX_YAML_BYTES = 1 << 20  # a sweep or traffic file: a few KB in practice
MAX_YAML_VALUES = 100_000  # values (scalars, lists, mappings) once aliases are expanded
MAX_YAML_DEPTH = 64  # lists and mappings inside one another
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when built in: 10x faster, its own depth limit


def read_text_file(path: str | Path, source: str, limit: int = MAX_YAML_BYTES) -> str:
    """The text of the regular file `path` (UTF-8, a BOM dropped), or a one-line UsageError starting with
    `source` (a flag and the path as given, or "sweep file x.yaml")."""
    p = Path(path)
    try:
        with open(p, "rb", opener=_nonblocking) as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise UsageError(f"{source}: not a regular file (a FIFO, a device or a folder cannot be read as one)")
            if info.st_size > limit:
                raise UsageError(f"{source}: the file is {info.st_size:,} bytes; at most {limit:,} are read")
            data = fh.read(limit + 1)
    except FileNotFoundError:
        raise UsageError(f"{source}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{source}: is a folder, not a file") from None
    except OSError as exc:
        raise UsageError(f"{source}: cannot be read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise UsageError(f"{source}: the file is over {limit:,} bytes; at most {limit:,} are read")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{source}: not UTF-8 text (byte {exc.start:,} is 0x{data[exc.start]:02x}); "
                         "give a text file") from None


def names_a_file(text: str | Path) -> bool:
    """`text` names something on disk (a file, a folder, a link, even a broken one); text that cannot be a path
    at all (a name too long, a NUL) names nothing, instead of raising OSError ("File name too long")."""
    try:
        return os.path.lexists(Path(text).expanduser())
    except (OSError, ValueError):
        return False


def inline_only(flag: str, *starts: str):
    """The web UI's check of a file-or-text option (`OptionSpec.web_check`): text written inline (starting
    with one of `starts`) passes; anything else could name a file on the server, which only the command
    line may name (a form field must not make the tool read one)."""
    def check(text: str) -> None:
        if not str(text).strip().startswith(starts):
            raise UsageError(f"{flag}: a file can only be named on the command line (or SM_LOCUST_*); in the web UI "
                             f"write the value itself (starting with {' or '.join(starts)})")
    return check


def _nonblocking(path: str, flags: int) -> int:
    """open() without blocking on a FIFO that has no writer (fstat then refuses it)."""
    return os.open(path, flags | os.O_NONBLOCK)


def load_json(text: str | bytes) -> Any:
    """`json.loads(text)`; a document nested too deeply to parse raises `json.JSONDecodeError` like any other
    malformed one, so every reader's handler words it."""
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("lists or objects nested too deeply", "", 0) from None


def load_yaml(text: str, source: str) -> Any:
    """The document in `text` as plain Python data, or a one-line UsageError starting with `source`."""
    if len(text) > MAX_YAML_BYTES:
        raise UsageError(f"{source}: {len(text):,} characters of YAML; at most {MAX_YAML_BYTES:,} are read")
    loader = _LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_size(node, source)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise UsageError(f"{source}: not valid YAML{_where(exc)}: {_problem(exc)}") from None
    except RecursionError:
        raise UsageError(f"{source}: nests lists or mappings too deeply; at most {MAX_YAML_DEPTH} levels") from None
    except (ValueError, OverflowError) as exc:  # an integer of 5,000 digits, a date 2024-13-45
        raise UsageError(f"{source}: a value cannot be read: {exc}") from None
    finally:
        loader.dispose()


def read_yaml(path: str | Path, source: str) -> Any:
    """`read_text_file` then `load_yaml`: a YAML (or JSON) file the user named."""
    return load_yaml(read_text_file(path, source), source)


def _check_size(root: yaml.Node, source: str) -> None:
    """Refuse a graph that expands to more than MAX_YAML_VALUES values, nests deeper than MAX_YAML_DEPTH
    or refers to itself; shared nodes are counted once per use, from a memo (nothing is expanded)."""
    expanded: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node, depth: int) -> int:
        key = id(node)
        if key in expanded:
            return expanded[key]
        if depth > MAX_YAML_DEPTH:
            raise UsageError(f"{source}: nests lists or mappings more than {MAX_YAML_DEPTH} levels deep{_at(node)}")
        if key in open_nodes:
            raise UsageError(f"{source}: an alias refers to the list or mapping it is in{_at(node)}; "
                             "write the value out")
        if isinstance(node, yaml.ScalarNode):
            return 1
        open_nodes.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            children = [part for pair in node.value for part in pair]
        for child in children:
            total += size(child, depth + 1)
            if total > MAX_YAML_VALUES:
                raise UsageError(f"{source}: holds more than {MAX_YAML_VALUES:,} values, counting each use of an "
                                 f"alias (*name){_at(node)}; write a smaller file")
        open_nodes.discard(key)
        expanded[key] = total
        return total

    size(root, 0)


def _at(node: yaml.Node) -> str:
    mark = node.start_mark
    return f" (line {mark.line + 1})" if mark is not None else ""


def _where(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    return f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""


def _problem(exc: yaml.YAMLError) -> str:
    """The parser's own words, without the snippet of the file it quotes (`problem`, else the first line)."""
    return str(getattr(exc, "problem", None) or str(exc).splitlines()[0] or type(exc).__name__)
