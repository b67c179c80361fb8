"""compare.html fits the page: runs side by side as columns, one row per figure, and a table wider
than the page scrolls in its own box; checked in headless chromium when it is installed."""

from __future__ import annotations

import json
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
    compare_table,
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
    assert set(INTERVALS) <= set(LABELS) and BOUNDS <= set(ROW_COLUMNS + LLM_COLUMNS)


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


SEARCH = Path(__file__).parent.parent / "data" / "summaries" / "built-2026-12-07-search.json"


def _run(tmp_path: Path, name: str, **changes) -> Path:
    """The golden run folder as `name`, its summary.json the built search run's with `changes`, its history
    without the line cut off mid-write (a run with no gap)."""
    folder = tmp_path / name
    shutil.copytree(GOLDEN, folder)
    history = folder / "locust_stats_history.csv"
    history.write_text("".join(history.read_text().splitlines(keepends=True)[:-1]))
    summary = {**json.loads(SEARCH.read_text()), **changes}
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def test_an_inconclusive_run_says_why_under_gaps_and_warnings_on_the_page_and_the_terminal(tmp_path, capsys):
    why = "step 2 (4 users) was client-bound: the load generator's CPU <b>95 %</b> (add workers)"
    decided = _run(tmp_path, "decided")
    starved = _run(tmp_path, "starved", verdict={"status": "inconclusive", "reason": why})
    outputs, gaps = compare_runs([str(decided), str(starved)], tmp_path / "cmp")
    section = outputs["html"].read_text().split('<section id="gaps"')[1].split("</section>")[0]
    assert "None." not in section
    assert ("<li>starved: INCONCLUSIVE: step 2 (4 users) was client-bound: the load generator&#x27;s CPU "
            "&lt;b&gt;95 %&lt;/b&gt; (add workers)</li>") in section  # the reason, sanitised for the page
    assert "decided:" not in section and gaps == []  # a warning, not a missing figure
    compare_runs([str(decided), str(_run(tmp_path, "again"))], tmp_path / "same")
    assert 'class="none"><h2>Gaps and warnings</h2><p>None.</p>' in (tmp_path / "same" / "compare.html").read_text()

    from sm_locust.cli import main

    capsys.readouterr()
    code = main(["compare", str(decided), str(starved), "--out", str(tmp_path / "cli")])
    out = capsys.readouterr().out
    assert [line for line in out.splitlines() if "INCONCLUSIVE" in line] == [f"sm-locust compare: starved: "
                                                                              f"INCONCLUSIVE: {why}"]
    assert code == main(["compare", str(decided), str(tmp_path / "again"), "--out", str(tmp_path / "cli2")])


def test_every_figure_with_an_interval_in_the_record_shows_it_in_the_table_page_and_terminal(tmp_path):
    run = _run(tmp_path, "search")
    steps = json.loads(SEARCH.read_text())["steps"]  # the knee step's token figures with their intervals
    steps[0]["llm"]["ci95"] = {"ttft_p95_ms": [18, 23], "itl_p95_ms": [4.5, 6.0], "output_tokens_per_s": [90.0, 110.0]}
    _run(tmp_path, "tokens", steps=steps)
    runs, table = compare_table([str(run), str(tmp_path / "tokens")], prices_file=None)
    row = table.iloc[0]
    knee = json.loads(SEARCH.read_text())["steps"][0]["ci95"]  # the plateau's knee step
    for figure in ("goodput_rps", "p50_ms", "p99_ms"):
        assert [row[f"{figure}_ci95_low"], row[f"{figure}_ci95_high"]] == knee[figure], figure
    assert [row["transactions_per_hour_ci95_low"], row["transactions_per_hour_ci95_high"]] == \
        pytest.approx([3600 * b for b in knee["rps"]])  # the one function, at each end of the rate's interval
    tokens = table.iloc[1]
    assert [tokens["output_tokens_per_s_ci95_low"], tokens["output_tokens_per_s_ci95_high"]] == [90.0, 110.0]
    page = compare_table_html(table)
    cells = {re.findall(r"<td[^>]*>(.*?)</td>", r)[0]: re.findall(r"<td[^>]*>(.*?)</td>", r)[1:]
             for r in re.findall(r"<tr>(.*?)</tr>", page.split("<tbody>")[1])}
    assert cells["goodput there (req/s)"][0] == "43.9 (±2.2)"
    assert cells["p50 there (ms)"][0] == "21.0 [21.0, 22.0]"
    assert cells["p99 there (ms)"][0] == "45.0"  # a zero-width interval: unknown, never "(±0)"
    assert cells["transactions per hour"][0] == "158,760 (±8,420)"
    assert cells["output tokens/s there"][:2] == ["99.4", "99.4 [90.0, 110.0]"]  # the first run's record has none
    assert cells["ITL p95 there (ms)"][:2] == ["5.0", "5.0 [4.5, 6.0]"]  # one format, with or without its interval
    assert "ci95" not in re.sub(r'title="[^"]*"', "", page)
    terminal = terminal_table(table, ("max_sustainable_rps", "output_tokens_per_s", "ttft_p95_ms"))
    assert "99.4 [90.0, 110.0]" in terminal[2] and "20 [18, 23]" in terminal[2]
