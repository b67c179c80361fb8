"""The one YAML reader (sm_locust/util/yamlsafe.py): aliases, size, nesting and cycles bounded before an
object is built; a binary, FIFO or oversized file refused in one line that never quotes the value."""

from __future__ import annotations

import os

import pytest

from sm_locust.errors import UsageError
from sm_locust.util.yamlsafe import MAX_YAML_BYTES, MAX_YAML_VALUES, load_yaml, read_text_file, read_yaml


def billion_laughs(levels: int = 9, width: int = 9) -> str:
    lines = ["a0: &a0 [" + ", ".join(["lol"] * width) + "]"]
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def refusal(text: str) -> str:
    with pytest.raises(UsageError) as info:
        load_yaml(text, "f.yaml")
    message = info.value.message
    assert message.startswith("f.yaml: ") and "\n" not in message and len(message) < 300
    return message


def test_ordinary_documents_load_as_plain_data():
    assert load_yaml("name: x\ngrid: {max_concurrency: [1, 2]}\n", "f") == {"name": "x",
                                                                          "grid": {"max_concurrency": [1, 2]}}
    assert load_yaml("base: &b {a: 1}\nmore: {<<: *b, c: 2}\nagain: [*b, *b]", "f") == {
        "base": {"a": 1}, "more": {"a": 1, "c": 2}, "again": [{"a": 1}, {"a": 1}]}  # a few aliases are fine
    assert load_yaml("", "f") is None


def test_an_alias_bomb_is_refused_without_expanding_it():
    message = refusal(billion_laughs())  # 9^9 = 387 million values once expanded
    assert f"more than {MAX_YAML_VALUES:,} values" in message and "lol" not in message


def test_a_self_referring_alias_a_deep_nesting_and_too_many_values_are_refused():
    assert "refers to the list or mapping it is in" in refusal("a: &a [1, *a]")
    assert "levels deep" in refusal("[" * 100 + "]" * 100)
    assert "nesting depth" in refusal("[" * 200_000)  # the parser's own limit, no RecursionError
    assert "values" in refusal("[" + "1," * (MAX_YAML_VALUES + 1) + "1]")


def test_values_python_cannot_build_and_tags_are_one_line():
    assert "4300 digits" in refusal("n: 1" + "0" * 5000)
    assert "month must be in 1..12" in refusal("d: 2024-13-45")
    assert "could not determine a constructor" in refusal("!!python/object/apply:os.system [id]")
    assert "(line 2, column 1)" in refusal("a: [1,\n")


def test_files_regular_utf8_bounded(tmp_path):
    (tmp_path / "bom.yaml").write_text("a: 1\n", encoding="utf-8-sig")
    assert read_yaml(tmp_path / "bom.yaml", "bom.yaml") == {"a": 1}
    (tmp_path / "bin.yaml").write_bytes(b"a: \xff\xfe\x00\x81")
    os.mkfifo(tmp_path / "fifo.yaml")
    with open(tmp_path / "big.yaml", "wb") as fh:
        fh.truncate(MAX_YAML_BYTES + 1)
    for name, needle in (("bin.yaml", "not UTF-8 text (byte 3 is 0xff)"), ("fifo.yaml", "not a regular file"),
                         ("big.yaml", f"at most {MAX_YAML_BYTES:,}"), ("nope.yaml", "no such file"),
                         ("", "is a folder"), ("x" * 5000 + ".yaml", "File name too long")):
        with pytest.raises(UsageError) as info:
            read_text_file(tmp_path / name, name[:20])
        assert needle in info.value.message
