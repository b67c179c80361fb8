"""The shell blocks docs/*.md mark runnable run as written on a fresh clone, offline, and leave
`git status` clean (how: tests/docs/runnable.py); README.md's run in test_runnable_readme.py, a file
of their own so the parallel runner (tests/run.py) can put the two on different processes.

Also the pure parts of the machinery: which blocks are marked, how they are shortened and checked.
"""

from __future__ import annotations

import os
import re

import pytest

from tests.conftest import ROOT
from tests.docs.runnable import (
    DOCUMENTS,
    MARK,
    STARVED,
    check_document,
    checked_script,
    commands,
    runnable_blocks,
    shortened,
)


def test_marked_blocks_are_shell_and_name_files_that_exist():
    found = 0
    for document in DOCUMENTS:
        text = (ROOT / document).read_text()
        for match in MARK.finditer(text):
            found += 1
            assert match["lang"] in ("bash", "sh"), f"{document}: a runnable block must be a shell block"
            for path in re.findall(r"(?:examples|sm_locust)/[\w./-]+\.\w+", match["body"]):
                assert (ROOT / path).is_file(), f"{document}: {path} does not exist"
    assert found >= 8  # README's examples at least


def test_shortening_keeps_the_commands():
    block = "sm-locust run -u 8 -t 1m --payload examples/body.json --endpoint-url http://127.0.0.1:8080\n"
    assert shortened(block, {"8080": 1234}) == ("sm-locust run -u 8 -t 3s --payload examples/body.json "
                                                "--endpoint-url http://127.0.0.1:1234\n")
    assert "--set" not in shortened("sm-locust sweep examples/sweeps/batching.yaml --plan", {})
    setup = "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[demo]' && sm-locust demo\n"
    assert shortened(setup, {}) == "sm-locust demo --step-seconds 1\n"


def test_each_foreground_command_is_checked():
    block = "sm-locust serve --port 8080 &   # a comment\n# a note\nsm-locust run \\\n    -u 2\nkill %1\n"
    assert commands(block) == ["sm-locust serve --port 8080 &   # a comment", "sm-locust run      -u 2", "kill %1"]
    script = checked_script(block, 1).splitlines()
    assert script[1] == "sm-locust run      -u 2" and script[2].endswith('{ [ "$__rc" -le 1 ]; } || exit "$__rc"')
    assert len(script) == 5  # the background command has no check
    # a sweep's exit 1 passes only when the block's log ends saying the load generator was starved twice
    sweep = checked_script("sm-locust sweep a.yaml --plan\nsm-locust sweep a.yaml --set x=1\n", 0).splitlines()
    assert STARVED not in sweep[1] and sweep[1].endswith('{ [ "$__rc" -le 0 ]; } || exit "$__rc"')
    assert sweep[3] == ('__rc=$?; echo "::rc $__rc"; { [ "$__rc" -le 0 ] || { [ "$__rc" -eq 1 ] && tail -n 3 '
                        f'"$BLOCK_LOG" | grep -qF "{STARVED}"; }}; }} || exit "$__rc"')


@pytest.mark.e2e
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("document", [d for d in DOCUMENTS
                                      if d != "README.md" and runnable_blocks((ROOT / d).read_text())])
def test_runnable_blocks_run_and_leave_git_status_clean(document, tmp_path):
    check_document(document, tmp_path)


@pytest.mark.e2e
def test_a_block_that_leaves_a_process_running_is_named(tmp_path):
    """The process-tree check after each block: a background job not stopped is named, one stopped is not."""
    from tests.docs.runnable import run_block

    _, left = run_block(tmp_path, "sleep 60 &\necho started\n", dict(os.environ), tmp_path / "a.log")
    assert len(left) == 1 and left[0].startswith("sleep 60"), left
    _, left = run_block(tmp_path, "sleep 60 &\nkill %1\n", dict(os.environ), tmp_path / "b.log")
    assert left == []
