"""A sweep's configurations are bounded before the grid is expanded (sweep/grid.py `MAX_CONFIGURATIONS`)."""

from __future__ import annotations

import pytest

from sm_locust.errors import UsageError
from sm_locust.sweep.grid import MAX_CONFIGURATIONS, expand


def test_a_grid_at_the_bound_expands_and_one_more_configuration_is_refused():
    grid = {"max_concurrency": list(range(MAX_CONFIGURATIONS // 10)), "workers": list(range(10))}
    assert len(expand({}, grid)) == MAX_CONFIGURATIONS
    with pytest.raises(UsageError, match=r"has 1,001 configurations \(grid 100 x 10, 1 listed\); a sweep runs at "
                                         r"most 1,000"):
        expand({}, grid, [{"max_concurrency": 5000}])


def test_a_million_combinations_are_refused_without_expanding_them():
    values = list(range(1000))
    with pytest.raises(UsageError, match=r"has 1,000,000 configurations \(grid 1,000 x 1,000, 0 listed\)"):
        expand({}, {"a": values, "b": values})


def test_a_full_disk_ends_the_usage_sampler_without_a_thread_traceback(monkeypatch):
    """Was: a disk full mid-sweep printed the sampler thread's traceback before the sweep's clean exit 1."""
    import os
    import threading
    from pathlib import Path

    from sm_locust.sweep.deployers.local import UsageSampler

    raised: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: raised.append(args.exc_value))
    sampler = UsageSampler(os.getpid(), Path("/dev/full"), every_s=0.01)  # every write: ENOSPC
    sampler.start()
    sampler._thread.join(5)
    sampler.stop()
    assert raised == [] and sampler.failed == "No space left on device"
