"""Load tests inside pytest: run a short Locust test in-process and assert on the result.

The work is `sm_locust.testing.inprocess` (`run_load_test`, `invoke_user`, `options_namespace`,
`LoadTestResult`: importable from here too); this module is the pytest plugin (the `pytest11` entry
point) and adds the fixture `sm_load_test`, writing its run folder under the test's tmp_path. pytest
loads it in every session, so it imports nothing heavy: `inprocess` imports Locust (which patches
gevent) only when a test runs a load test. Import its functions after `locust`, as conftest.py does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from sm_locust.testing.inprocess import LoadTestResult

API = ("LoadTestResult", "invoke_user", "options_namespace", "run_load_test")


def __getattr__(name: str) -> Any:
    """`from sm_locust.testing import run_load_test` loads `sm_locust.testing.inprocess` (and Locust) only then."""
    if name in API:
        # lazy: it imports Locust (gevent patching), not for every pytest session
        from sm_locust.testing import inprocess

        return getattr(inprocess, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@pytest.fixture
def sm_load_test(tmp_path) -> Callable[..., LoadTestResult]:
    """`run_load_test` with its run folder under the test's tmp_path (`sm-load-test-N/`)."""
    count = 0

    def run(user_classes: Sequence[type], **kwargs) -> LoadTestResult:
        nonlocal count
        count += 1
        kwargs.setdefault("out_dir", tmp_path / f"sm-load-test-{count}")
        return __getattr__("run_load_test")(user_classes, **kwargs)

    return run
