"""What a run folder's files must look like to be read: summary.json's documented shape and the
rows of Locust's history CSV.

Why a module of its own: `runfolder.py` reads a run folder tolerantly (a killed run leaves cut-off
files, and those become gaps), but valid JSON of the wrong shape (`"totals": []`, a step whose
`rps` is text) is not damage, it is another file, and it used to surface as an AttributeError deep
in the report or the gates. `check_summary` holds summary.json against docs/summary.md (the keys
that are there; later versions add keys, so unknown ones pass) and raises one UsageError naming the
first key that is wrong. `drop_malformed_rows` does the same for the history CSV line by line (a
shifted row, an unclosed quote that would swallow the lines after it): under
`MAX_MALFORMED_SHARE` the rows are dropped and counted in a gap, above it the file is refused.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from sm_locust.errors import UsageError

MAX_MALFORMED_SHARE = 0.02  # above 2 % of its rows malformed, a history CSV is refused, not patched

# kinds: "count" (whole number >= 0), "number" (finite), "text", "time" (ISO-8601), "bool", "object", "interval"
# ([low, high], the 95 % intervals),
# "list"; a trailing "?" allows null.
TOTALS = {
    "requests": "count", "failures": "count", "rps": "number", "goodput_rps": "number?",
    "p50_ms": "number?", "p95_ms": "number?", "p99_ms": "number?", "errors": "object", "open_loop": "object",
    "ci95": "object?",
}
STEP = {
    "users": "number", "start": "time", "end": "time", "duration_s": "number?", "steady_s": "number?",
    "requests": "count", "failures": "count", "total_requests": "count?", "rps": "number", "goodput_rps": "number?",
    "p50_ms": "number?", "p90_ms": "number?", "p95_ms": "number?", "p99_ms": "number?", "p99_9_ms": "number?",
    "error_rate": "number?", "stable": "bool?", "unstable_reason": "text?", "client_cpu_pct": "number?",
    "client_bound": "bool?", "client_bound_reason": "text?", "target_rate": "number?", "sent_rps": "number?",
    "late_fraction": "number?", "dropped_fraction": "number?", "client_wait_pct": "number?", "ci95": "object?",
    "judged": "bool?",
}
PLATEAU = {
    "users": "number?", "rps": "number?", "p50_ms": "number?", "p95_ms": "number?", "p99_ms": "number?",
    "reason": "text?", "stable": "bool?", "reached": "bool?", "bound": "text?", "error_rate": "number?",
    "text": "text?", "capacity_ci95": "interval?", "capacity_step": "count?", "knee_step": "count?",
    "inconclusive": "bool?", "inconclusive_reason": "text?",
}
VERDICT = {"status": "text", "reason": "text?"}
HOUR = {
    "hour": "count", "start": "time", "end": "time", "duration_s": "number?", "users": "number?",
    "users_max": "number?", "requests": "count", "failures": "count", "successes": "count?", "rps": "number",
    "goodput_rps": "number?", "error_rate": "number?", "p50_ms": "number?", "p95_ms": "number?", "p99_ms": "number?",
    "client_cpu_pct": "number?", "backoffs": "count?", "target_rate": "number?", "errors": "object?",
}
TARGET = {  # one entry of `targets` (a traffic mix, sm_locust.record.targets); `others` adds `targets`
    "name": "text", "requests": "count", "failures": "count", "p50_ms": "number?", "p95_ms": "number?",
    "p99_ms": "number?", "cold": "count?", "targets": "count?",
}
MODEL_CACHE = {
    "source": "text", "requests": "count", "hit_rate": "number?", "threshold_ms": "number?", "cold": "object?",
    "warm": "object?",
}
AUTOSCALING = {  # sm_locust.scaling.figures.autoscaling_figures
    "source": "text?", "time_scale": "number?", "duration_s": "number?", "policy": "object?", "scale_events": "list",
    "instances": "list", "periods": "list?", "peak_instances": "count?", "instance_hours": "number?",
    "cost_usd": "number?", "slo": "object?", "slo_breach_s": "number?", "breaches": "list?", "failed": "count?",
    "throttled": "count?", "flaps": "count?", "watched": "object?",
}
SCALE_EVENT = {"t_s": "number", "direction": "text", "from": "count", "to": "count", "reaction_s": "number?",
               "ready_s": "number?", "ready_at_s": "number?"}
INSTANCE_SAMPLE = {"t_s": "number", "desired": "count", "in_service": "count"}
MIX = {"field": "text", "spec": "text", "kind": "text", "targets": "count", "seed": "number?", "zipf_s": "number?",
       "top_weights": "object?"}
SUMMARY = {
    "schema": "count", "endpoint": "text?", "started_at": "time?", "ended_at": "time?", "duration_s": "number?",
    "totals": "object", "steps": "list", "plateau": "object?", "payload": "object?", "by_name": "object?",
    "complete": "bool?", "hours": "list?", "targets": "list?", "model_cache": "object?", "mix": "object?",
    "autoscaling": "object?", "traffic": "object?", "verdict": "object?", "publish": "object?", "async": "object?",
}
ASYNC = {  # sm_locust.record.asyncsummary.AsyncSummary.to_json
    "accepted": "count", "results": "count", "failures": "count", "failed": "object", "time_to_result": "object",
    "acceptance": "object", "awaited_at_stop": "count", "polls": "count", "poll_resolution_max_ms": "number?",
    "backlog_max": "count", "not_kept": "count?",
}


def check_summary(summary: Any, source: str | Path) -> Any:
    """`summary` unchanged when it has summary.json's documented shape, else a one-line UsageError."""
    problem = summary_problem(summary)
    if problem:
        raise UsageError(f"{source} is not an sm-locust summary.json: {problem} (the format is in docs/summary.md)")
    return summary


def summary_problem(summary: Any) -> str | None:
    """The first key of `summary` whose value does not have the documented type, as a phrase; None if none."""
    if not isinstance(summary, Mapping):
        return f"it holds a JSON {_json_type(summary)}, not an object"
    problem = _check(summary, SUMMARY, "")
    if problem:
        return problem
    for key, spec in (("totals", TOTALS), ("plateau", PLATEAU), ("model_cache", MODEL_CACHE), ("mix", MIX),
                      ("autoscaling", AUTOSCALING), ("verdict", VERDICT), ("async", ASYNC)):
        if isinstance(summary.get(key), Mapping):
            problem = _check(summary[key], spec, f"{key}.")
            if problem:
                return problem
    problem = _check_intervals((summary.get("totals") or {}).get("ci95"), "totals.ci95")
    for i, step in enumerate(summary.get("steps") or []):
        problem = problem or (_check_intervals(step.get("ci95"), f"steps[{i}].ci95") if isinstance(step, Mapping)
                              else None)
    if problem:
        return problem
    errors = (summary.get("totals") or {}).get("errors") or {}
    for code, count in errors.items():
        if not _is(count, "count"):
            return f"totals.errors.{code} is {count!r}, not a whole number"
    scaling: Mapping[str, Any] = summary["autoscaling"] if isinstance(summary.get("autoscaling"), Mapping) else {}
    for items, spec, prefix in ((summary.get("steps"), STEP, "steps"),
                                (scaling.get("scale_events"), SCALE_EVENT, "autoscaling.scale_events"),
                                (scaling.get("instances"), INSTANCE_SAMPLE, "autoscaling.instances"),
                                (summary.get("targets"), TARGET, "targets"), (summary.get("hours"), HOUR, "hours")):
        problem = _check_items(items or [], spec, prefix)
        if problem:
            return problem
    for name, record in (summary.get("by_name") or {}).items():
        if not isinstance(record, Mapping):
            return f"by_name.{name} is a JSON {_json_type(record)}, not an object"
        problem = _check(record, TOTALS, f"by_name.{name}.")
        if problem:
            return problem
    return None


def _check_intervals(ci95: Any, prefix: str) -> str | None:
    """A `ci95` object: each figure's `[low, high]` (low <= high) or null."""
    if not isinstance(ci95, Mapping):
        return None
    for key, value in ci95.items():
        if not _is(value, "interval?"):
            return f"{prefix}.{key} is {_show(value)}, not {_KIND_WORDS['interval']}"
    return None


def _check_items(items: list, spec: Mapping[str, str], prefix: str) -> str | None:
    """The first problem of a list of records (`prefix[i]` names each), or None."""
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            return f"{prefix}[{i}] is a JSON {_json_type(item)}, not an object"
        problem = _check(item, spec, f"{prefix}[{i}].")
        if problem:
            return problem
    return None


def _check(record: Mapping, spec: Mapping[str, str], prefix: str) -> str | None:
    for key, kind in spec.items():
        if key in record and not _is(record[key], kind):
            return f"{prefix}{key} is {_show(record[key])}, not {_KIND_WORDS[kind.rstrip('?')]}"
    return None


_KIND_WORDS = {"count": "a whole number >= 0", "number": "a number", "text": "text", "time": "an ISO-8601 time",
               "bool": "true or false", "object": "an object", "list": "a list",
               "interval": "an interval [low, high] (or null)"}


def _is(value: Any, kind: str) -> bool:
    if value is None:
        return kind.endswith("?")
    kind = kind.rstrip("?")
    if kind in ("count", "number"):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return False
        return kind == "number" or (value >= 0 and float(value).is_integer())
    if kind == "text":
        return isinstance(value, str)
    if kind == "time":
        if not isinstance(value, str):
            return False
        try:
            datetime.fromisoformat(value)  # Python 3.11+ reads the Z suffix
        except ValueError:
            return False
        return True
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "object":
        return isinstance(value, Mapping)
    if kind == "interval":
        return (isinstance(value, list) and len(value) == 2 and all(_is(v, "number") for v in value)
                and value[0] <= value[1])
    return isinstance(value, list)


def _json_type(value: Any) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")


def _show(value: Any) -> str:
    text = repr(value)
    return (text if len(text) <= 40 else text[:39] + "…") + f" (a JSON {_json_type(value)})"


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
