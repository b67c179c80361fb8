"""README.md's runnable blocks, then those of the docs that run README's commands again (docs/gates.md,
docs/autoscaling.md), one after another in ONE fresh clone, as a newcomer pastes them: after each
block no process it started is left; at the end `git status` of the clone is clean
(tests/docs/runnable.py: `GROUPS`, `check_documents`). Then the autoscaling sweep's per-configuration
pages and compare.html those blocks wrote are screenshotted with `chromium --headless --screenshot`
into the test's tmp folder (`screenshots/`, kept as artifacts: look at them) and checked to be PNGs
of the window's size with something drawn.

A file of its own (the suite's longest, minutes): tests/run.py deals whole files to its processes,
and the other docs' group (test_runnable_docs_group.py) runs beside it."""

from __future__ import annotations

import pytest

from tests.docs.runnable import ARTIFACTS, check_documents, cli_screenshot, groups, screenshots


@pytest.mark.e2e
@pytest.mark.timeout(2400)
def test_readmes_blocks_and_those_that_rerun_them_run_in_one_clone_and_leave_nothing(tmp_path):
    pages = check_documents(groups()["readme"], tmp_path)
    reports = tmp_path / "clone" / "reports"
    scaling = sorted(reports.glob("sweeps/ranker-scaling/*/report.html"))
    compare = reports / "compare" / "compare.html"
    assert len(scaling) == 2 and compare in pages, [str(p.relative_to(reports)) for p in pages]
    for page in [*scaling, compare]:
        name = "-".join(page.relative_to(reports).with_suffix(".png").parts)
        cli_screenshot(page, tmp_path / "screenshots" / name, tmp_path / "chromium")  # size, something drawn
    screenshots(pages, reports, ARTIFACTS / "readme")  # every page, offline, with Playwright when installed
