"""An .npz payload is checked before anything is inflated (payloads/arrays.py `check_npz`): its members, its
inflated size and each member's declared shape; a batch is bounded before its rows are allocated."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

from sm_locust.errors import UsageError
from sm_locust.payloads import arrays
from sm_locust.payloads.arrays import MAX_BATCH_BYTES, batches, check_npz


def sampled(*args):
    """Every body `batches` samples (it yields them one at a time)."""
    return list(batches(*args))


def npz(path, members: dict[str, bytes]):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def npy(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def test_members_at_the_bound_pass_and_one_more_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(arrays, "MAX_NPZ_MEMBERS", 3)
    check_npz(npz(tmp_path / "at.npz", {f"a{i}.npy": npy(np.ones(2)) for i in range(3)}))
    with pytest.raises(UsageError, match=r"past.npz' has 4 members; an .npz payload holds at most 3 arrays"):
        check_npz(npz(tmp_path / "past.npz", {f"a{i}.npy": npy(np.ones(2)) for i in range(4)}))


def test_inflated_size_at_the_bound_passes_and_past_it_is_refused_before_inflating(tmp_path, monkeypatch):
    data = npy(np.zeros(10_000))  # 80 KB of zeros: a few hundred bytes deflated
    monkeypatch.setattr(arrays, "MAX_NPZ_BYTES", 2 * len(data))
    check_npz(npz(tmp_path / "at.npz", {"a.npy": data, "b.npy": data}))
    bomb = npz(tmp_path / "bomb.npz", {"a.npy": data, "b.npy": data, "c.npy": data})
    assert bomb.stat().st_size < len(data)
    with pytest.raises(UsageError, match=rf"bomb.npz' inflates to {3 * len(data):,} bytes"):
        check_npz(bomb)


def test_a_member_declaring_more_than_it_holds_is_refused(tmp_path):
    header = npy(np.ones(4))
    lying = header.replace(b"(4,), }" + b" " * 12, b"(1000000000000,), }")  # shape (10**12,), same header length
    path = npz(tmp_path / "huge.npz", {"x.npy": lying})
    with pytest.raises(UsageError, match=r"x.npy declares shape \(1000000000000,\) \(8,000,000,000,000 bytes\)"):
        check_npz(path)
    with pytest.raises(UsageError):  # the whole load path refuses it too, in one line
        sampled(path, 1, 4, None)


def test_a_member_that_is_not_an_array_is_refused(tmp_path):
    path = npz(tmp_path / "readme.npz", {"x.npy": npy(np.ones(3)), "readme.txt": b"hello\x1b]0;t\x07"})
    with pytest.raises(UsageError, match=r"holds 'readme.txt', which is not an array"):
        check_npz(path)


def test_a_batch_at_the_bound_is_sampled_and_one_row_more_is_refused(tmp_path):
    rows = np.ones((8, 1024))  # 8 KB a row
    np.save(tmp_path / "rows.npy", rows)
    at = MAX_BATCH_BYTES // (8 * 1024)
    out = sampled(tmp_path / "rows.npy", at, 1, None)
    assert len(out) == 1 and out[0].shape == (at, 1024)
    with pytest.raises(UsageError, match=rf"--batch-size {at + 1:,} rows .* use --batch-size {at:,} or fewer"):
        sampled(tmp_path / "rows.npy", at + 1, 1, None)
    with pytest.raises(UsageError, match=r"--batch-size 1,000,000,000"):
        sampled(tmp_path / "rows.npy", 1_000_000_000, 64, None)


def test_the_distinct_bodies_are_bounded_in_all(tmp_path, monkeypatch):
    np.save(tmp_path / "rows.npy", np.ones((1000, 128)))  # 1 KB a row
    monkeypatch.setattr(arrays, "MAX_BATCHES_BYTES", 10 * 1024 * 10)  # ten batches of ten 1-KB rows
    assert len(sampled(tmp_path / "rows.npy", 10, 10, None)) == 10  # at the bound: all asked for
    assert len(sampled(tmp_path / "rows.npy", 10, 64, None)) == 10  # past it: fewer distinct bodies
    assert len(sampled(tmp_path / "rows.npy", 5, 64, None)) == 20
