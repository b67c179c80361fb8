"""README.md's runnable blocks (the demo, the plateau search, gates, sweeps, scaling, multi-model,
LLM) run as written on a fresh clone, offline, and leave `git status` clean (tests/docs/runnable.py).
The longest docs test (minutes), so it is a file of its own: tests/run.py deals whole files to its
processes."""

from __future__ import annotations

import pytest

from tests.docs.runnable import check_document


@pytest.mark.e2e
@pytest.mark.timeout(1200)
def test_readmes_runnable_blocks_run_and_leave_git_status_clean(tmp_path):
    check_document("README.md", tmp_path)
