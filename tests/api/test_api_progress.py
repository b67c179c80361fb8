"""The Python API's progress display: one line from Locust's output lines (synthetic here), and the
choice of display (notebook line, terminal line, tqdm bar) from the environment."""

from __future__ import annotations

import io

import pytest

from sm_locust.api.progress import RunProgress, TerminalLine, TqdmBar, choose_display
from sm_locust.errors import UsageError
from sm_locust.record.progress import ProgressSample, parse_progress

LINES = [
    "sm-locust: running Locust against 'ep' at http://127.0.0.1:9; results go to out/",
    "[2026-01-01 00:00:00,000] host/INFO/locust.main: Starting Locust 2.47.0",
    "Type     Name   # reqs      # fails |    Avg     Min",
    "sm-locust [    1s] users=1    rps=    44.0  goodput=    44.0  p95=22 ms  failures=0",
    "sm-locust: step 1: 1 user: 44.6 req/s, p95 22 ms, client CPU 2 %",
    "sm-locust [    2s] users=4    rps=   131.0  goodput=   120.0  p95=31 ms  failures=11"
    "  backoffs=3 (connection errors)",
    "[2026-01-01 00:00:02,000] host/ERROR/locust.user.task: boom: something broke",
]


@pytest.mark.parametrize("sample", [
    ProgressSample(12, 8, 180.6, 180.6, 89.0, 0),
    ProgressSample(3, 1, 0.0, 0.0, None, 4),
    ProgressSample(7200, 1000, 12345.6, 12000.1, 1234.0, 345, backoffs=12),
    ProgressSample(30, 4, 100.0, 100.0, 20.0, 0, window_s=5),
])
def test_the_progress_line_round_trips(sample):
    assert parse_progress(sample.line()) == sample


def test_other_lines_are_not_progress():
    assert parse_progress("sm-locust: step 1: 1 user: 44.6 req/s") is None
    assert parse_progress("Aggregated  1234  0(0.00%)") is None


def test_the_one_line_has_the_latest_figures_the_step_and_the_errors():
    state = RunProgress(total_s=60)
    assert state.text() == "starting Locust"
    changed = [state.feed(line) for line in LINES]
    assert changed == [True, False, False, True, True, True, True]  # Locust's own log and tables change nothing
    text = state.text()
    assert text.startswith("[2 s of 60 s] 4 users, 131.0 req/s (goodput 120.0), p95 31 ms, 11 failed/s, 3 back-offs"
                           " (so far)")
    assert "| 1 error line in locust.log (last: boom: something broke) | step 1: 1 user: 44.6 req/s" in text
    assert "\n" not in text and len(text) <= 200


def test_the_start_line_gives_way_to_the_figures():
    state = RunProgress()
    state.feed(LINES[0])
    assert "running Locust against 'ep'" in state.text()
    state.feed(LINES[3])
    assert state.text() == "[1 s] 1 user, 44.0 req/s, p95 22 ms, 0 failed/s (so far)"


@pytest.mark.parametrize("progress, notebook, tty, tqdm, widgets, expected", [
    (True, True, False, False, False, "notebook-line"),
    (True, True, False, True, False, "notebook-line"),  # text tqdm in a notebook is no better than the line
    (True, True, False, True, True, "tqdm-notebook"),
    (True, False, True, True, False, "tqdm"),
    (True, False, True, False, False, "terminal-line"),
    (True, False, False, True, False, "terminal-line"),  # a log file gets lines, not a bar's redraws
    ("line", False, True, True, False, "terminal-line"),
    ("line", True, False, True, True, "notebook-line"),
    ("tqdm", False, False, True, False, "tqdm"),
    (False, True, False, True, True, "off"),
    ("off", False, True, True, False, "off"),
])
def test_choosing_the_display(progress, notebook, tty, tqdm, widgets, expected):
    assert choose_display(progress, notebook=notebook, tty=tty, has_tqdm=tqdm, has_widgets=widgets) == expected


def test_bad_progress_values_are_one_line():
    with pytest.raises(UsageError, match="progress='bar': choose True, False, or one of 'auto', 'line', 'tqdm', 'off'"):
        choose_display("bar", notebook=False, tty=True, has_tqdm=True, has_widgets=False)
    with pytest.raises(UsageError, match="progress='tqdm' needs tqdm: pip install tqdm"):
        choose_display("tqdm", notebook=False, tty=True, has_tqdm=False, has_widgets=False)


def test_to_a_file_a_line_every_few_seconds_and_one_per_step():
    out, now = io.StringIO(), [0.0]
    display = TerminalLine(out, every_s=5.0, clock=lambda: now[0])
    state = RunProgress()
    for t in range(13):  # a progress line every second
        now[0] = float(t)
        state.feed(f"sm-locust [{t:5d}s] users=2    rps=    10.0  goodput=    10.0  p95=5 ms  failures=0")
        if t == 7:
            state.feed("sm-locust: step 2: 2 users: 10.0 req/s")
        display.update(state)
    display.close("done in 13 s; results in out/")
    lines = out.getvalue().splitlines()
    assert [line.split("]")[0] for line in lines[:-1]] == ["sm-locust [0 s", "sm-locust [5 s", "sm-locust [7 s",
                                                          "sm-locust [12 s"]  # the step line restarts the 5 s
    assert lines[-1] == "sm-locust: done in 13 s; results in out/"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_line_is_rewritten_in_place():
    out = _Tty()
    display, state = TerminalLine(out), RunProgress()
    for t in range(3):
        state.feed(f"sm-locust [{t:5d}s] users=2    rps=    10.0  goodput=    10.0  p95=5 ms  failures=0")
        display.update(state)
    display.close("done")
    text = out.getvalue()
    assert text.count("\r") == 4 and text.count("\n") == 1 and text.endswith("sm-locust: done\n")


def test_a_tqdm_bar_counts_the_run_seconds():
    pytest.importorskip("tqdm")
    out = io.StringIO()
    bar, state = TqdmBar(total_s=10, stream=out), RunProgress(total_s=10)
    for t in (1, 2, 3):
        state.feed(f"sm-locust [{t:5d}s] users=2    rps=    10.0  goodput=    10.0  p95=5 ms  failures=0")
        bar.update(state)
    assert bar.bar.n == 3
    bar.close("done in 4 s")
    text = out.getvalue()
    assert "3/10 s" in text and "2 users, 10.0 req/s, p95 5 ms, 0 failed/s" in text
    assert text.rstrip().endswith("sm-locust: done in 4 s")


def test_a_run_folder_named_with_controls_is_printed_escaped():
    """The API prints its own closing line (no CLI around it): a folder named with ESC ] 0 ; ... BEL stays inert."""
    out = _Tty()
    display = TerminalLine(out)
    display.close("done in 3 s; results in run\x1b]0;pwned\x07\u202e/")
    text = out.getvalue()
    assert "\x1b]" not in text and "\x07" not in text and "\u202e" not in text
    assert text.endswith("results in run\\x1b]0;pwned\\x07\\u202e/\n")
