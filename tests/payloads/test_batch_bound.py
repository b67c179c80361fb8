"""`--batch-size` over `.npy`/`.npz` rows: at the bound it samples, one row past it is refused before any copy."""

from __future__ import annotations

import numpy as np
import pytest

from sm_locust.errors import UsageError
from sm_locust.payloads.arrays import MAX_BATCH_BYTES, batches


def test_a_batch_at_the_bound_is_sampled_and_one_row_past_it_is_refused(tmp_path):
    path = tmp_path / "rows.npz"
    per_row = 39 * 4
    np.savez(path, x=np.zeros((10, 39), dtype=np.float32))
    most = MAX_BATCH_BYTES // per_row
    first = next(batches(path, most, 1, 0))
    assert first["x"].shape == (most, 39)
    with pytest.raises(UsageError, match=f"--batch-size {most + 1:,} rows .* use --batch-size {most:,} or fewer"):
        next(batches(path, most + 1, 1, 0))
    with pytest.raises(UsageError, match="--batch-size 200,000,000 rows"):
        next(batches(path, 200_000_000, 64, 0))
