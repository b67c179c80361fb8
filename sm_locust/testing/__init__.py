"""Load tests inside pytest: run a short Locust test in-process and assert on the result.

The work is `sm_locust.testing.inprocess` (`run_load_test`, `invoke_user`, `options_namespace`,
`LoadTestResult`: importable from here too); this module is the pytest plugin. pytest loads it in
every session of an environment where sm-locust is installed (the `pytest11` entry point), so it
imports nothing heavy: `sm_locust.testing.inprocess` imports Locust, which patches gevent, and loads only
when a test runs a load test.

    from sm_locust.testing import invoke_user, run_load_test

    def test_endpoint_holds_its_latency(local_endpoint_url):
        result = run_load_test([invoke_user(b'{"instances": []}')], users=4, run_time_s=3,
                               options={"endpoint_name": "ep", "endpoint_url": local_endpoint_url})
        result.assert_gates(max_p95_ms=100, max_error_rate=0.0)

As a pytest plugin (`pytest_plugins = ["sm_locust.testing"]` in conftest.py, or the `pytest11`
entry point) it adds the fixture `sm_load_test`: the same function, writing its run folder under
the test's tmp_path. (Locust's own plugin already owns the fixture names `session` and
`fastsession`.) Import `sm_locust.testing`'s functions after `locust` (gevent patching), as
conftest.py does.
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
