"""Files written whole (sm_locust/util/outputs.py): a failed write leaves the earlier file and no temporary
file; a device, a FIFO or a folder is never replaced; a symlink planted in an output's place is refused; output paths
that no file can have (too long, a symlink loop) are one line naming the option."""

from __future__ import annotations

import os
import stat

import pytest

from sm_locust.errors import UsageError
from sm_locust.util.outputs import (
    atomic_file,
    check_output_dir,
    check_output_file,
    open_output,
    promote,
    write_atomic,
)


def test_a_failed_write_leaves_the_earlier_file_and_no_temporary(tmp_path):
    path = tmp_path / "summary.json"
    write_atomic(path, '{"a": 1}')
    with pytest.raises(RuntimeError), atomic_file(path) as fh:
        fh.write('{"a": ')  # half a document, then the writer fails (a full disk, a signal)
        raise RuntimeError("disk full")
    assert path.read_text() == '{"a": 1}' and sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]
    assert stat.S_IMODE(path.stat().st_mode) & 0o044  # as readable as any other file (mkstemp makes 0600)


def test_a_device_a_fifo_or_a_folder_is_never_replaced(tmp_path):
    """Was: smoke --junit /dev/full, run as root, renamed the report over the device node."""
    fifo = tmp_path / "fifo.xml"
    os.mkfifo(fifo)
    for target in (fifo, tmp_path):
        with pytest.raises(UsageError, match="is not a regular file"):
            write_atomic(target, "<testsuites/>")
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    with pytest.raises(UsageError, match=r"--junit .*fifo.xml is not a regular file"):
        check_output_file(fifo, "--junit")


def test_a_planted_symlink_is_refused_and_its_target_left_alone(tmp_path):
    """Was: a link planted at reports/compare/compare.html had its target replaced by the page."""
    (tmp_path / "real.xml").write_text("old")
    (tmp_path / "link.xml").symlink_to("real.xml")
    with pytest.raises(UsageError, match=r"link.xml is a symbolic link; sm-locust does not write through"):
        write_atomic(tmp_path / "link.xml", "new")
    with pytest.raises(UsageError, match=r"^--junit .*link.xml is a symbolic link"):
        check_output_file(tmp_path / "link.xml", "--junit")
    with pytest.raises(UsageError, match=r"link.xml is a symbolic link"):
        open_output(tmp_path / "link.xml", "ab")
    assert (tmp_path / "real.xml").read_text() == "old" and (tmp_path / "link.xml").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.xml", "real.xml"]  # no temporary left


def test_a_dangling_link_is_refused_too(tmp_path):
    """A link to a file that does not exist yet would create it wherever the link points."""
    (tmp_path / "link.csv").symlink_to(tmp_path / "elsewhere.csv")
    for write in (lambda: write_atomic(tmp_path / "link.csv", "x"), lambda: open_output(tmp_path / "link.csv")):
        with pytest.raises(UsageError, match="is a symbolic link"):
            write()
    assert not (tmp_path / "elsewhere.csv").exists()


def test_open_output_writes_and_appends_a_plain_file(tmp_path):
    with open_output(tmp_path / "a.log", "wb") as fh:
        fh.write(b"one\n")
    with open_output(tmp_path / "a.log", "ab") as fh:
        fh.write(b"two\n")
    assert (tmp_path / "a.log").read_bytes() == b"one\ntwo\n"
    with open_output(tmp_path / "a.log", "w") as fh:
        fh.write("new")
    assert (tmp_path / "a.log").read_text() == "new"


def test_promote_renames_only_a_whole_file(tmp_path):
    whole, half = tmp_path / ".a.partial", tmp_path / ".b.partial"
    whole.write_text("<html></html>")
    half.write_text("<html><body>")
    assert promote(whole, tmp_path / "a.html", lambda p: p.read_text().endswith("</html>"))
    assert not promote(half, tmp_path / "b.html", lambda p: p.read_text().endswith("</html>"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.html"]


def test_a_name_too_long_or_a_symlink_loop_is_one_line(tmp_path):
    (tmp_path / "loop").symlink_to("loop")
    for check, flag in ((check_output_dir, "--out"), (check_output_file, "--junit")):
        with pytest.raises(UsageError, match=f"{flag} .*loop: Too many levels of symbolic links"):
            check(tmp_path / "loop", flag)
        with pytest.raises(UsageError, match=f"{flag} .*: File name too long"):
            check(tmp_path / ("x" * 300), flag)
