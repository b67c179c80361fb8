"""Every name a command echoes reaches the terminal inert: a run folder named `run<ESC>]0;title<BEL>` is printed
with its controls escaped (sanitize.py `TerminalStream`, installed by `sm_locust.cli.main`)."""

from __future__ import annotations

import io
import json

from sm_locust.cli import main
from sm_locust.sanitize import TerminalStream

HOSTILE = "run\x1b]0;pwned\x07\u202e\x9b31m"
SUMMARY = {"schema": 1, "endpoint": "ep", "totals": {"requests": 100, "failures": 0, "rps": 10.0, "p50_ms": 5.0,
                                                     "p95_ms": 9.0, "p99_ms": 12.0, "errors": {}},
           "steps": [], "plateau": None}


def test_a_hostile_run_folder_name_is_printed_escaped(tmp_path, monkeypatch, capsys):
    (tmp_path / HOSTILE).mkdir()
    (tmp_path / HOSTILE / "summary.json").write_text(json.dumps(SUMMARY))
    monkeypatch.chdir(tmp_path)
    for argv in (["compare", HOSTILE], ["report", HOSTILE, "--no-cloudwatch"], ["compare", f"{HOSTILE}/nope"]):
        main(argv)
        out, err = capsys.readouterr()
        for control in ("\x1b", "\x07", "\u202e", "\x9b"):
            assert control not in out + err, argv
        assert "run\\x1b]0;pwned\\x07\\u202e\\x9b31m" in out + err, argv


def test_the_stream_keeps_a_progress_line_and_escapes_the_rest():
    sink = io.StringIO()
    stream = TerminalStream(sink)
    assert stream.write("\r12 users\x1b[K\n") == len("\r12 users\x1b[K\n")
    stream.write("a\x1b]0;t\x07b\tc\u2066\n")
    assert sink.getvalue() == "\r12 users\x1b[K\na\\x1b]0;t\\x07b\tc\\u2066\n"
