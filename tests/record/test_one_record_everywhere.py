"""One plateau run, every surface, the same per-step figures (issue 28, "Done when" 1).

A short plateau search against the local endpoint through `sm-locust run`, then `sm-locust
report`: the step lines it printed (their final figures), summary.json, steps.csv, report.html's
step table, `sm_locust.load(...).steps` and the sweep's figures and line for that run hold the
same numbers for each step, and every line that quotes the plateau quotes its own step's rate,
users and percentile. The steps are short (3-4 s): what is asserted is the identity of figures,
not their accuracy (bench/plateau_trust.py measures that).
"""

from __future__ import annotations

import csv
import html
import json
import math
import re

import pytest

import sm_locust
from sm_locust.endpoint.server import LocalEndpoint
from sm_locust.record.summary import step_line
from sm_locust.sweep.costing import Price
from sm_locust.sweep.realtime.measure import measure
from sm_locust.sweep.realtime.render import configuration_line
from sm_locust.sweep.realtime.rows import RealtimeFigures, RealtimeRow
from sm_locust.util.formatting import with_interval
from tests.conftest import SAMPLE_PAYLOAD, run_cli

pytestmark = pytest.mark.e2e

FIGURES = ("requests", "failures", "rps", "goodput_rps", "p50_ms", "p95_ms", "p99_ms")
CI_FIGURES = ("rps", "goodput_rps", "p50_ms", "p95_ms", "p99_ms")
STEP_LINE = re.compile(r"^sm-locust: (step (\d+): .*)$")


@pytest.fixture(scope="module")
def plateau_run(tmp_path_factory):
    """One plateau run and its report: (run folder, the run's stdout, the report's stdout)."""
    folder = tmp_path_factory.mktemp("identity")
    with LocalEndpoint(max_concurrency=2, service_time_ms=20.0, log_path=folder / "endpoint.log") as ep:
        out = folder / "run"
        run = run_cli("run", "--endpoint-name", "ep", "--endpoint-url", ep.url, "--payload", str(SAMPLE_PAYLOAD),
                      "--shape", "plateau", "--min-step-seconds", "3", "--step-seconds", "4", "--max-users", "16",
                      "--out", str(out), "-q", timeout=170)
    assert run.returncode == 0, run.stdout + run.stderr
    report = run_cli("report", str(out), "--no-cloudwatch", timeout=120)
    assert report.returncode == 0, report.stdout + report.stderr
    return out, run.stdout, report.stdout


def close(a, b) -> bool:
    if a is None or b is None or (isinstance(a, float) and math.isnan(a)):
        return (a is None or (isinstance(a, float) and math.isnan(a))) and \
            (b is None or (isinstance(b, float) and math.isnan(b)))
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)


def number_or_none(text: str):
    return None if text in ("", "nan") else float(text)


@pytest.mark.timeout(300)
def test_every_surface_shows_the_same_figures_for_each_step(plateau_run):
    out, stdout, report_stdout = plateau_run
    summary = json.loads((out / "summary.json").read_text())
    steps, plateau = summary["steps"], summary["plateau"]
    assert len(steps) >= 3 and plateau["capacity_step"] is not None and plateau["knee_step"] is not None

    # the live lines: one per judged step, in order, each the line of summary.json's record (final figures);
    # a step the search did not judge (cut short by the end) would follow them, marked
    judged = [s for s in steps if s.get("judged", True)]
    assert steps[:len(judged)] == judged
    printed = [m.group(1) for m in map(STEP_LINE.match, stdout.splitlines()) if m]
    assert [int(re.match(r"step (\d+)", line).group(1)) for line in printed] == list(range(1, len(judged) + 1))
    assert printed == [step_line(i, record) for i, record in enumerate(judged, start=1)]
    for line, record in zip(printed, judged, strict=True):
        assert f"{with_interval(record['rps'], record['ci95']['rps'], ' req/s', 1)}" in line

    # steps.csv (sm-locust report): the same records, the same intervals
    with open(out / "steps.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [int(r["step"]) for r in rows] == list(range(1, len(steps) + 1))
    for row, record in zip(rows, steps, strict=True):
        assert int(float(row["users"])) == record["users"]
        for key in FIGURES:
            assert close(number_or_none(row[key]), record[key]), (key, row[key], record[key])
        for key in CI_FIGURES:
            interval = record["ci95"][key] or [None, None]
            assert close(number_or_none(row[f"{key}_ci95_low"]), interval[0])
            assert close(number_or_none(row[f"{key}_ci95_high"]), interval[1])

    # report.html's step table: each row's cells are the record's figures with their intervals
    page = (out / "report.html").read_text()
    table = page[page.index('<table id="steps">'):]
    table = table[:table.index("</table>")]
    cells = [re.findall(r"<td>(.*?)</td>", tr) for tr in re.findall(r"<tr>(.*?)</tr>", table[table.index("<tbody>"):])]
    head = re.findall(r"<th>(.*?)</th>", table)
    assert len(cells) == len(steps)
    for tr, record in zip(cells, steps, strict=True):
        shown = dict(zip(head, (html.unescape(c) for c in tr), strict=True))
        assert shown["#"] == str(steps.index(record) + 1) and shown["users"] == str(record["users"])
        assert shown["req/s"] == with_interval(record["rps"], record["ci95"]["rps"], "", 1)
        assert shown["p95 ms"] == with_interval(record["p95_ms"], record["ci95"]["p95_ms"], "", 1)
    capacity, knee = steps[plateau["capacity_step"]], steps[plateau["knee_step"]]
    capacity_words = (f"{with_interval(plateau['capacity_rps'], plateau['capacity_ci95'], ' req/s', 1)} "
                      f"(step {plateau['capacity_step'] + 1}: {capacity['users']} users")
    knee_words = f"step {plateau['knee_step'] + 1}: {with_interval(knee['rps'], knee['ci95']['rps'], ' req/s', 1)} " \
                 f"at {knee['users']} users"
    assert capacity_words in html.unescape(page) and knee_words in html.unescape(page)
    assert f"Capacity (best stable goodput at or beyond the knee): {capacity_words}" in report_stdout
    assert f"Knee (least load within 5 % of the plateau): {knee_words}" in report_stdout

    # the notebook: sm_locust.load(...).steps
    frame = sm_locust.load(out).steps
    assert len(frame) == len(steps)
    for (_, row), record in zip(frame.iterrows(), steps, strict=True):
        assert row["users"] == record["users"]
        for key in FIGURES:
            assert close(row[key], record[key]), key
        for key in CI_FIGURES:
            assert close(row[f"{key}_ci95_low"], (record["ci95"][key] or [None])[0])

    # the plateau: its figures are its steps' own; the line printed names them
    assert plateau["capacity_rps"] == capacity["goodput_rps"]
    assert plateau["capacity_ci95"] == capacity["ci95"]["goodput_rps"]
    assert (plateau["users"], plateau["rps"], plateau["p95_ms"]) == (knee["users"], knee["rps"], knee["p95_ms"])
    assert f"sm-locust: {plateau['text']}" in stdout
    knee_text = f"step {plateau['knee_step'] + 1}: {knee['goodput_rps']:.0f} req/s at {knee['users']} users"
    if plateau["reached"]:  # "plateau: capacity C (±h) at step N: U users, p95 L; knee step K: ..."
        assert f"at step {plateau['capacity_step'] + 1}: {capacity['users']} users" in plateau["text"]
        assert f"knee {knee_text}" in plateau["text"]
    else:  # a busy machine may not saturate the endpoint within --max-users: "... best step K: ..."
        assert f"best {knee_text}" in plateau["text"]

    # the sweep's figures and line for this run: the knee step's own rate, users and percentile
    m = measure(summary, 95.0)
    assert (m.knee_step, m.knee_rps, m.knee_users, m.latency_ms) == \
        (plateau["knee_step"], knee["rps"], knee["users"], knee["p95_ms"])
    assert (m.capacity_step, m.capacity_rps, m.capacity_ci95, m.capacity_users) == \
        (plateau["capacity_step"], capacity["goodput_rps"], capacity["ci95"]["goodput_rps"], capacity["users"])
    row = RealtimeRow(index=0, label="max_concurrency 2", key="k", settings={}, run_dir="run", status="ok",
                      price=Price(usd_per_hour=None, source=None, instance_type="local"),
                      figures=RealtimeFigures(**vars(m)))
    line = configuration_line(1, 1, row, "p95")
    assert (f"{with_interval(knee['rps'], m.knee_rps_ci95, ' req/s', 1)} at {knee['users']} users, "
            f"p95 {with_interval(knee['p95_ms'], m.latency_ci95, ' ms')}") in line
