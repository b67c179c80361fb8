"""The verdict a run closes with: the whole-run line (totals, the plateau's verdict, INCONCLUSIVE, the
Locust workers lost), and the one-line reasons a run measured nothing (nothing completed, every
request failed; every worker lost).

Pure reads of summary.json's typed record (`record.model.Summary`; a dict is read as one), plus
Locust's failures CSV for the first failure's text, sanitised: it quotes the endpoint.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path

from sm_locust.measure.looplag import BOTTLENECK
from sm_locust.publish.sender import closing_clause
from sm_locust.record.model import Interval, JsonObject, Summary
from sm_locust.sanitize import clean
from sm_locust.util.formatting import MISSING, is_missing, number, with_interval


def verdict_line(summary: Summary | JsonObject) -> str:
    """The totals line `run` closes with, the plateau's verdict and an INCONCLUSIVE line under it."""
    record = Summary.of(summary)
    t = record.totals
    errors = clean(", ".join(f"{code} {n}" for code, n in (t.errors or {}).items()))
    p95, goodput = t.p95_ms, t.goodput_rps
    ci = whole_run_intervals(record)
    rate = with_interval(t.rps if t.rps is not None else 0, ci.get("rps"), " req/s", 1)
    line = (f"whole run: {number(t.requests)} requests, {rate}"
            + ("" if goodput is None else f", goodput {number(goodput, 1)} req/s")
            + f", p95 {f'{MISSING} ms' if is_missing(p95) else with_interval(p95, ci.get('p95_ms'), ' ms')}"
            + f", {number(t.failures)} failures" + (f" ({errors})" if errors else ""))
    in_flight = t.in_flight_at_stop or 0
    if in_flight:  # cut short by the stop: in no count above
        line += f"; {in_flight} request{'s' if in_flight != 1 else ''} in flight at the stop"
    backoff = t.backoff or {}
    if backoff.get("count"):  # sm_locust.users.backoff: the endpoint could not be reached
        line += f"; {backoff['count']} back-offs after connection errors ({backoff.get('seconds', 0):.1f} s)"
    open_loop = t.open_loop
    if open_loop:
        line += (f"; open loop: {open_loop.get('sent', 0)} sent, {open_loop.get('late_fraction', 0) * 100:.1f} % late, "
                 f"{open_loop.get('dropped', 0)} dropped")
    lost = lost_workers(record)
    if lost:
        line += f"; {lost}"
    published = (record.publish or {}).get("cloudwatch")
    if published:  # --publish cloudwatch (sm_locust.publish): what went out, and what did not
        line += f"; {closing_clause(published)}"
    text = record.plateau.text if record.plateau is not None else None
    if text:
        line += f"\n{text}"
    inconclusive = inconclusive_reason(record)
    if inconclusive is not None and not str(text or "").startswith("INCONCLUSIVE"):
        line += f"\nINCONCLUSIVE: {inconclusive} (a measurement of the load generator, not of the endpoint)"
    return line


def verdict_lines(summary: Summary | JsonObject) -> list[str]:
    """`verdict_line`'s lines, each sanitised for a terminal: what every command that ends a run prints
    (an INCONCLUSIVE note under the totals is the verdict's why, so no caller keeps only the first)."""
    return [clean(line, None) for line in verdict_line(summary).splitlines()]


def whole_run_intervals(summary: Summary | JsonObject) -> Mapping[str, Interval | None]:
    """summary.json's `totals.ci95` when the run held one load (at most one step): over a run whose
    load changed, the whole-run rate averages different loads and its interval says nothing useful
    (the steps' intervals are the ones to read); {} otherwise."""
    record = Summary.of(summary)
    if len(record.steps) > 1 or record.totals.ci95 is None:
        return {}
    return record.totals.ci95


def inconclusive_reason(summary: Summary | JsonObject) -> str | None:
    """Why the run's answer is inconclusive (summary.json `verdict`, record.summary.verdict_of), or None."""
    record = Summary.of(summary)
    if record.inconclusive:
        assert record.verdict is not None
        return str(record.verdict.reason or BOTTLENECK)
    return None


def lost_workers(summary: Summary | JsonObject) -> str | None:
    """`1 of 2 Locust workers lost (missing 4.1 s into the test)` when a distributed run lost workers
    (summary.json `workers.lost`: `missing`, no heartbeat; `quit`), else None."""
    workers = Summary.of(summary).workers
    if workers is None or not workers.lost:
        return None
    whole = max(workers.expected or 0, workers.connected or 0, len(workers.lost))
    each = ", ".join(f"{clean(str(w.reason or 'lost'), 20)} {number(w.after_s, 1)} s" for w in workers.lost)
    return f"{len(workers.lost)} of {whole} Locust worker{'s' if whole != 1 else ''} lost ({each} into the test)"


def nothing_completed(summary: Summary | JsonObject) -> str | None:
    """`no request completed: 4 were in flight at the stop (...)` when the run sent nothing that ended
    (a test shorter than the endpoint's answers, a shape that never started a user, every Locust
    worker lost); else None."""
    record = Summary.of(summary)
    totals = record.totals
    if totals.requests:
        return None
    lost = lost_workers(record)
    if lost and record.workers is not None and not record.workers.at_end:
        return (f"no request completed: {lost}, and Locust stops a test without workers (a worker whose "
                "event loop stalls for ~4 s misses its heartbeats: see summary.json loop_lag; a loaded "
                "machine, or fewer --processes)")
    in_flight = totals.in_flight_at_stop or 0
    if in_flight:
        return (f"no request completed: {in_flight} {'were' if in_flight != 1 else 'was'} in flight at the stop "
                "(the endpoint answered none within the run: a longer -t/--run-time, or check the endpoint's latency)")
    return "no request completed: nothing was sent (check --users, the shape and --run-time)"


def every_request_failed(summary: Summary | JsonObject, out: Path) -> str | None:
    """`every request failed: ValidationError x2625 (first: ...)` when the run sent requests and none
    succeeded (the endpoint, the payload or the credentials are wrong, not the load); else None."""
    totals = Summary.of(summary).totals
    requests, failures = totals.requests or 0, totals.failures or 0
    if not requests or failures < requests:
        return None
    errors = ", ".join(f"{code} x{n}" for code, n in (totals.errors or {}).items()) or f"x{failures}"
    first = first_failure(out / "locust_failures.csv")
    return f"every request failed: {errors}" + (f" (first: {first})" if first else "")


def first_failure(path: Path, limit: int = 200) -> str | None:
    """The error text of the most frequent failure in Locust's failures CSV, shortened to `limit`."""
    try:
        with open(path, newline="", encoding="utf-8", errors="replace") as fh:
            rows = [row for row in csv.DictReader(fh) if row.get("Error")]
    except OSError:
        return None
    if not rows:
        return None
    def occurrences(row: dict) -> int:
        return int(row.get("Occurrences") or 0) if str(row.get("Occurrences")).isdigit() else 0

    return clean(" ".join(max(rows, key=occurrences)["Error"].split()), limit)
