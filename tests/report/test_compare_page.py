"""compare.html fits the page: runs side by side as columns, one row per figure, and a table wider
than the page scrolls in its own box; checked in headless chromium when it is installed."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from sm_locust.report.compare import (
    BOUNDS,
    INTERVALS,
    LABELS,
    ROW_COLUMNS,
    RunComparison,
    compare_runs,
    compare_table_html,
    render_compare,
    terminal_table,
)
from sm_locust.report.llm import LLM_COLUMNS

GOLDEN = Path(__file__).parent.parent / "data" / "report" / "golden"
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
# writes whether the page is wider than the window (a horizontal scrollbar for the whole page)
PROBE = ("<script>document.body.setAttribute('data-page-overflow', String(document.documentElement.scrollWidth"
         " > document.documentElement.clientWidth));</script></body>")


def test_the_table_has_one_column_per_run_with_its_change_and_one_labelled_row_per_figure():
    table = pd.DataFrame({"run": ["c5-xlarge", "g5-2xlarge", "inf2"], "max_sustainable_rps": [20.0, None, 30.0],
                          "transactions_per_hour": [587926.8, 1200000.4, 600.0],
                          "cw_CPUUtilization_avg_pct": [50.0, 75.0, 0.0]})
    page = compare_table_html(table)
    assert page.startswith('<div class="scroll"><table id="compare">')
    head = re.search(r"<thead><tr>(.*?)</tr></thead>", page).group(1)
    assert re.findall(r"<th>(.*?)</th>", head) == ["figure", "c5-xlarge", "g5-2xlarge", "change vs c5-xlarge", "inf2",
                                                   "change vs c5-xlarge"]
    rows = re.findall(r"<tr>(.*?)</tr>", page.split("<tbody>")[1])
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in rows]
    assert cells == [
        ["max sustainable throughput (req/s)", "20.0", "n/a", "", "30.0", "+50.0 %"],
        ["transactions per hour", "587,927", "1,200,000", "+104.1 %", "600", "-99.9 %"],  # whole transactions
        ["endpoint CPU there (avg %, summed over cores)", "50.0", "75.0", "+50.0 %", "0.0", "-100.0 %"]]
    assert 'title="cw_CPUUtilization_avg_pct"' in page  # the field name is still there, on hover


def test_the_terminal_table_has_a_row_per_run_and_the_change_vs_the_first():
    table = pd.DataFrame({"run": ["a", "longer-name"], "max_sustainable_rps": [100.0, 125.0], "p95_ms": [40.0, 30.0],
                          "usd_per_million": [None, None]})
    lines = terminal_table(table)
    assert len(lines) == 3
    assert lines[0].split()[0] == "run" and "usd" not in lines[0] and "$" not in lines[0]  # no run is priced
    assert lines[1].split() == ["a", "100.0", "40.0"]
    assert lines[2].split() == ["longer-name", "125.0", "(+25.0", "%)", "30.0", "(-25.0", "%)"]
    assert len({len(line) for line in lines}) == 1  # aligned


def overflows(page: Path, tmp_path: Path) -> bool:
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text().replace("</body>", PROBE))
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          f"--user-data-dir={tmp_path / 'chromium'}", "--window-size=1280,900",
                          "--virtual-time-budget=3000", "--dump-dom", probed.as_uri()],
                         capture_output=True, text=True, timeout=90)
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'data-page-overflow="(true|false)"', dom.stdout)
    assert found, dom.stdout[-500:]
    return found.group(1) == "true"


@pytest.mark.e2e
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
@pytest.mark.parametrize("count", [3, 12])
def test_compare_page_is_no_wider_than_a_laptop_window(tmp_path, count):
    runs = []
    for i in range(count):
        run = tmp_path / f"run-ml.c5.{i}xlarge"
        shutil.copytree(GOLDEN, run)
        runs.append(str(run))
    outputs, _ = compare_runs(runs, tmp_path / "cmp")
    assert not overflows(outputs["html"], tmp_path)


def test_the_page_shows_human_labels_with_intervals_and_no_change_for_a_step_index():
    table = pd.DataFrame({"run": ["a", "b"], "max_sustainable_rps": [100.0, 170.0], "step": [5, 1],
                          "rps_ci95_low": [98.0, 166.0], "rps_ci95_high": [102.0, 174.0],
                          "capacity_rps": [120.0, 170.0], "capacity_ci95_low": [None, 166.0],
                          "capacity_ci95_high": [None, 174.0], "inconclusive": [False, True]})
    page = compare_table_html(table)
    rows = re.findall(r"<tr>(.*?)</tr>", page.split("<tbody>")[1])
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in rows]
    assert cells == [
        ["max sustainable throughput (req/s)", "100.0 (±2.0)", "170.0 (±4.0)", "+70.0 %"],
        ["sustainable step (index)", "5", "1", ""],  # an index: no change in %
        ["capacity (req/s)", "120.0", "170.0 (±4.0)", "+41.7 %"],  # the first run has no interval
        ["inconclusive (no step decided)", "no", "yes", ""]]
    shown_text = re.sub(r'title="[^"]*"', "", page)  # the field names stay on hover only
    assert "ci95" not in shown_text and "capacity_rps" not in shown_text and "%" not in cells[1][3]


def test_the_terminal_table_shows_intervals_and_sanitised_run_names():
    table = pd.DataFrame({"run": ["a", "b\x1b[31m"], "max_sustainable_rps": [100.0, 125.0],
                          "rps_ci95_low": [96.0, None], "rps_ci95_high": [104.0, None], "p95_ms": [40.0, 30.0],
                          "p95_ms_ci95_low": [38.0, 25.0], "p95_ms_ci95_high": [42.0, 31.0]})
    lines = terminal_table(table)
    assert lines[0].split("  ")[0] == "run" and "ci95" not in lines[0]
    assert lines[1].split() == ["a", "100.0", "(±4.0)", "40.0", "(±2.0)"]
    assert lines[2].split() == ["b\\x1b[31m", "125.0", "(+25.0", "%)", "30.0", "[25.0,", "31.0]", "(-25.0", "%)"]
    assert "\x1b" not in "".join(lines)


def test_a_real_compare_page_labels_every_row_and_names_no_interval_bound(tmp_path):
    outputs, _ = compare_runs([str(GOLDEN), str(GOLDEN)], tmp_path / "cmp")
    page = outputs["html"].read_text()
    table = page.split('<table id="compare">')[1].split("</table>")[0]
    rows = {cells[0]: cells[1:] for cells in (re.findall(r"<td[^>]*>(.*?)</td>", r)
                                              for r in re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1]))}
    assert not [name for name in rows if "_" in name]  # a label in words, never a field name
    assert "ci95" not in re.sub(r'title="[^"]*"', "", page)  # nor in "No run has: ..." under the table
    assert rows["sustainable step (index)"][2] == ""  # an index: no change, not "+0.0 %"
    assert rows["max sustainable throughput (req/s)"][2] == "+0.0 %"  # a figure: its change
    csv = outputs["csv"].read_text().splitlines()[0].split(",")
    assert {"step", "rps_ci95_low", "rps_ci95_high", "capacity_ci95_high"} <= set(csv)  # the CSV stays machine-readable


def test_every_compare_column_has_a_label_or_is_the_bound_of_a_labelled_figure():
    assert [c for c in ROW_COLUMNS + LLM_COLUMNS if c != "run" and c not in LABELS and c not in BOUNDS] == []
    assert set(INTERVALS) <= set(LABELS) and BOUNDS <= set(ROW_COLUMNS)


def _steps(users: list[int], rps: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"step": range(1, len(users) + 1), "users": users, "rps": rps, "goodput_rps": rps,
                         "p95_ms": [50.0] * len(users)})


def test_a_run_loaded_by_rate_phases_is_not_drawn_against_users():
    plateau = RunComparison("plateau", {}, _steps([1, 4, 8], [20.0, 80.0, 150.0]))
    watched = RunComparison("watched", {}, _steps([2, 15, 11], [12.0, 86.8, 132.7]), rate_phases=True)
    table = pd.DataFrame({"run": ["plateau", "watched"], "usd_per_million": [None, None]})
    page = render_compare([plateau, watched], table)
    drawn = re.findall(r'"name":"(\w+)"', page.split('id="cmp-throughput"')[1].split("</script>")[0])
    assert drawn == ["plateau"]
    assert page.count("watched: its load was rate phases, which users do not set") == 2  # both charts say why
    only = render_compare([watched], table.iloc[1:])
    assert '<div id="cmp-throughput" class="missing">' in only and 'id="cmp-latency"' not in only  # no empty chart
    assert "watched: its load was rate phases" in only
