"""docs/limits.md's table of sizes and counts says what the code enforces: each row names the constant
(`module.py` `NAME`) and its limit, and the two agree."""

from __future__ import annotations

import importlib
import re

from tests.conftest import ROOT

UNITS = {"": 1, "MB": 1 << 20, "GB": 1 << 30}


def rows() -> list[tuple[str, str]]:
    text = (ROOT / "docs" / "limits.md").read_text()
    table = text.split("## Sizes and counts", 1)[1].split("\n## ", 1)[0]
    out = []
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] not in ("what", "---"):
            out.append((cells[1], cells[3]))
    return out


def test_every_limit_in_the_table_is_the_constant_it_names():
    checked = 0
    for limit, where in rows():
        module, name = re.match(r"`([\w/]+)\.py` `(\w+)`", where).groups()
        value = getattr(importlib.import_module("sm_locust." + module.replace("/", ".")), name)
        number, unit = re.match(r"([\d,]+)\s*(MB|GB)?", limit).groups()
        assert value == int(number.replace(",", "")) * UNITS[unit or ""], (limit, where, value)
        checked += 1
    assert checked >= 14
