"""What a run folder's files must look like to be read: summary.json's documented shape and the
rows of Locust's history CSV.

`runfolder.py` reads a run folder tolerantly (a killed run leaves cut-off files, and those become
gaps), but valid JSON of the wrong shape (`"totals": []`, a step whose `rps` is text) is another
file, not damage. `check_summary` reads summary.json as its typed records (`record.model`: the keys
that are there must have their kinds; unknown keys pass, later versions add keys) and raises one
UsageError naming the first key that is wrong. `drop_malformed_rows` does the same for the history
CSV line by line (a shifted row, an unclosed quote that would swallow the lines after it): under
`MAX_MALFORMED_SHARE` the rows are dropped and counted in a gap, above it the file is refused.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import TypeVar

from sm_locust.errors import UsageError
from sm_locust.record.model import ShapeError, Summary

MAX_MALFORMED_SHARE = 0.02  # above 2 % of its rows malformed, a history CSV is refused, not patched
T = TypeVar("T")


def read_summary(summary: object, source: str | Path) -> Summary:
    """`summary` (summary.json's JSON) as typed records, else a one-line UsageError naming the first wrong key."""
    try:
        return Summary.from_json(summary)
    except ShapeError as problem:
        raise UsageError(f"{source} is not an sm-locust summary.json: {problem} (the format is in docs/summary.md)"
                         ) from None


def check_summary(summary: T, source: str | Path) -> T:
    """`summary` unchanged when it has summary.json's documented shape, else a one-line UsageError."""
    read_summary(summary, source)
    return summary


def summary_problem(summary: object) -> str | None:
    """The first key of `summary` whose value does not have the documented type, as a phrase; None if none."""
    try:
        Summary.from_json(summary)
    except ShapeError as problem:
        return str(problem)
    return None


def drop_malformed_rows(text: str, path: Path, what: str, gaps: list[str], *, time_column: str = "Timestamp",
                        max_share: float = MAX_MALFORMED_SHARE) -> str:
    """`text` (a CSV with a header) without its malformed rows, each judged on its own line: a wrong
    number of fields, an unclosed quote, or a `time_column` that is not whole seconds. Dropped rows
    are counted in `gaps`; more than `max_share` of them is a UsageError (the file is not Locust's
    history any more, and what is left would be a few seconds presented as the run)."""
    lines = text.splitlines(keepends=True)
    if len(lines) < 2:
        return text
    header = next(csv.reader([lines[0]]))
    width = len(header)
    at = header.index(time_column) if time_column in header else None
    kept = [lines[0]]
    bad: list[int] = []
    rows = 0
    for number, line in enumerate(lines[1:], start=2):
        row = line.rstrip("\r\n")
        if not row.strip():
            continue
        rows += 1
        if _row_fields(row, width, at):
            kept.append(line)
        else:
            bad.append(number)
    if not bad:
        return text
    more = ", ..." if len(bad) > 3 else ""
    where = f"line {bad[0]}" if len(bad) == 1 else f"lines {', '.join(map(str, bad[:3]))}{more}"
    if len(bad) > max_share * rows:
        raise UsageError(f"{path}: {len(bad)} of {rows} rows are malformed ({where}: wrong field count, an unclosed "
                         f"quote, or a {time_column} that is not whole seconds); more than {max_share:.0%} of the "
                         "file, so it is not read")
    gaps.append(f"{what}: dropped {len(bad)} malformed row(s) of {rows} in {path.name} ({where})")
    return "".join(kept)


def _row_fields(row: str, width: int, at: int | None) -> bool:
    """True when one CSV line holds `width` fields and whole seconds at `at` (fast path without quotes)."""
    if '"' in row:
        try:
            fields = next(csv.reader([row], strict=True))
        except (csv.Error, StopIteration):
            return False
        if len(fields) != width:
            return False
    else:
        if row.count(",") + 1 != width:
            return False
        fields = row.split(",", at + 1) if at is not None else []
    return at is None or fields[at].strip().isdigit()
