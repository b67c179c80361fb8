"""Every runnable block of README.md and docs/, one after another in ONE fresh clone, in the order a
newcomer meets them (README.md, then the docs in the order it links them: tests/docs/runnable.py's
`ORDER`), as they paste them: after each block no process it started is left; at the end `git
status` of the clone is clean (`check_documents`). Then the autoscaling sweep's per-configuration
pages and compare.html those blocks wrote are screenshotted with `chromium --headless --screenshot`
into the test's tmp folder (`screenshots/`, kept as artifacts: look at them) and checked to be PNGs
of the window's size with something drawn; every page is screenshotted with Playwright when it is
installed.

The suite's longest file (minutes): tests/run.py deals whole files to its processes, longest first,
so it runs on a process of its own while the others share the rest."""

from __future__ import annotations

import pytest

from tests.docs.runnable import (
    ARTIFACTS,
    check_documents,
    cli_screenshot,
    documents_in_order,
    screenshots,
    sweep_reports,
)


@pytest.mark.e2e
@pytest.mark.timeout(3000)
def test_every_runnable_block_runs_in_one_clone_in_order_and_leaves_nothing(tmp_path):
    pages = check_documents(documents_in_order(), tmp_path)
    reports = tmp_path / "clone" / "reports"
    # two configurations, each with its final report; a configuration measured client-bound first keeps
    # that run beside its own (`.client-bound`), recorded in sweep.json as re-measured (`sweep_reports`)
    scaling = sweep_reports(reports / "sweeps" / "ranker-scaling")
    compare = reports / "compare" / "compare.html"
    assert len(scaling) == 2 and compare in pages, [str(p.relative_to(reports)) for p in pages]
    for page in [*scaling, compare]:
        name = "-".join(page.relative_to(reports).with_suffix(".png").parts)
        cli_screenshot(page, tmp_path / "screenshots" / name, tmp_path / "chromium")  # size, something drawn
    screenshots(pages, reports, ARTIFACTS / "pages")  # every page, offline, with Playwright when installed
