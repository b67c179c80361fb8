"""The runnable blocks of every other doc (docs/*.md in the order README.md links them, then the
unlinked ones alphabetically), one after another in ONE fresh clone, as a newcomer pastes them: after
each block no process it started is left; at the end `git status` of the clone is clean
(tests/docs/runnable.py). A file of its own so tests/run.py runs it beside README.md's group."""

from __future__ import annotations

import pytest

from tests.docs.runnable import ARTIFACTS, check_documents, groups, screenshots


@pytest.mark.e2e
@pytest.mark.timeout(2400)
def test_the_other_docs_blocks_run_in_one_clone_in_order_and_leave_nothing(tmp_path):
    pages = check_documents(groups()["docs"], tmp_path)
    screenshots(pages, tmp_path / "clone" / "reports", ARTIFACTS / "docs")
