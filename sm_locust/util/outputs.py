"""Output paths: checked before anything starts, and a run folder locked while a run writes it.

`check_output_dir` / `check_output_file` refuse an unwritable path in one line before the test and
create nothing. `locked_folder` flocks a run folder while a run writes it (a killed process releases
it); `run_in_progress` tells a reader the folder is still being written. No output goes through a
symbolic link the tool did not make (`refuse_link`; `open_output` uses O_NOFOLLOW). Every file of a
run or sweep folder is written atomically (`atomic_file`, `write_atomic`: a temporary file renamed
over the name once whole), so a full disk leaves the earlier file or none, never half a file;
`promote` does the same for a file another program writes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from sm_locust.errors import UsageError


def check_output_dir(folder: Path, flag: str = "--out") -> None:
    """A one-line UsageError when `folder` is not a writable folder and cannot be made one: a file in
    the way, a file above it, a folder this user cannot write, or a file system that refuses (/proc).
    Leaves nothing behind."""
    refuse_unusable(folder, flag)
    if folder.exists():
        if not folder.is_dir():
            raise UsageError(f"{flag} {folder}: a file is in the way; pass a folder path")
        if not os.access(folder, os.W_OK | os.X_OK):  # also a read-only file system, for root too (EROFS)
            raise UsageError(f"{flag} {folder}: the folder is not writable"
                             + (" (a read-only file system)" if _read_only(folder) else ""))
        _check_free_space(folder, flag, folder)
        return
    parent = _existing_parent(folder)
    if not parent.is_dir():
        raise UsageError(f"{flag} {folder} cannot be created: {parent} is a file, not a folder")
    try:  # the only sure test (root passes os.access on /proc, which refuses every mkdir)
        os.rmdir(tempfile.mkdtemp(prefix=".sm-locust-", dir=parent))
    except OSError as exc:
        raise UsageError(f"{flag} {folder} cannot be created: {exc.strerror or exc} in {parent}") from None
    _check_free_space(parent, flag, folder)


def check_output_file(path: Path, flag: str) -> None:
    """A one-line UsageError, before anything runs, when `path` cannot be written as a file: a folder in
    its place, a folder above it that cannot be made or written, a read-only or full file system."""
    refuse_unusable(path, flag)
    refuse_link(path, flag)
    if path.is_dir():
        raise UsageError(f"{flag} {path} is a folder; pass a file path, e.g. {path / 'report.xml'}")
    if path.exists() and not path.is_file():
        raise UsageError(f"{flag} {path} is not a regular file (a device or a FIFO); pass a file path")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise UsageError(f"{flag} {path}: the file is not writable"
                             + (" (a read-only file system)" if _read_only(path.parent) else ""))
        _check_free_space(path.parent, flag, path)
        return
    folder = path.absolute().parent
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{flag} {path} cannot be written: {path.parent} is a file, not a folder")
    try:
        check_output_dir(folder, flag)
    except UsageError as exc:  # named by the file asked for, not its folder
        raise UsageError(f"{flag} {path}: {exc.message.removeprefix(f'{flag} {folder}').lstrip(': ')}") from None


IN_USE = "is being written by another sm-locust run right now; wait for it to end, or choose another folder"
MIN_FREE_BYTES = 1 << 20  # a run folder, a report or a JUnit file needs more than this; less means a full disk


def refuse_unusable(path: Path, flag: str) -> None:
    """A name no file or folder can have (too long), a symlink loop: one line naming `flag` (pathlib would
    report the loop as "not there" and fail at mkdir, and the long name as an OSError)."""
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENAMETOOLONG):
            raise UsageError(f"{flag} {str(path)[:80]}{'...' if len(str(path)) > 80 else ''}: {exc.strerror}") from None


def _existing_parent(path: Path) -> Path:
    parent = path.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    return parent


def _read_only(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _check_free_space(folder: Path, flag: str, target: Path) -> None:
    try:
        status = os.statvfs(folder)
    except OSError:
        return
    free = status.f_bavail * status.f_frsize
    if free < MIN_FREE_BYTES:
        raise UsageError(f"{flag} {target}: the file system is full ({free // 1024} KB free, at least "
                         f"{MIN_FREE_BYTES // (1 << 20)} MB needed); free some space or choose another place")


# Folders a run of this process is writing, locked (`locked_folder`): path -> (fd, thread). A run's
# start (`start_run`, the demo) takes the lock before it touches the folder and `execute` takes it
# again (the same thread: no-op), so an --overwrite never removes the files of a run in progress.
_LOCKED: dict[str, tuple[int, int]] = {}
_LOCKED_GUARD = threading.Lock()


@contextlib.contextmanager
def locked_folder(folder: Path, flag: str = "--out") -> Iterator[None]:
    """Hold an exclusive lock on a run folder while a run writes it: another sm-locust run into the same
    folder at the same time is refused in one line (both used to claim it). The lock is an flock on the
    folder itself (nothing left behind; released when the process ends, however it ends)."""
    key = os.path.realpath(folder)
    with _LOCKED_GUARD:
        held = _LOCKED.get(key)
        if held is not None and held[1] == threading.get_ident():
            reentered = True
        else:
            reentered = False
            fd = os.open(key, os.O_RDONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise UsageError(f"{flag} {folder} {IN_USE}") from None
            _LOCKED[key] = (fd, threading.get_ident())
    if reentered:
        yield
        return
    try:
        yield
    finally:
        with _LOCKED_GUARD:
            fd, _ = _LOCKED.pop(key)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def run_in_progress(folder: Path) -> bool:
    """True while an sm-locust run (of any process) holds `folder` locked."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return os.path.realpath(folder) not in _LOCKED  # this process's own lock does not count
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def locked_by_another(folder: Path) -> bool:
    """True while a run other than the calling thread's holds `folder` locked (another process, or another
    thread of this one: `sm_locust.run(out=same)` from two threads)."""
    key = os.path.realpath(folder)
    with _LOCKED_GUARD:
        held = _LOCKED.get(key)
    if held is not None:
        return held[1] != threading.get_ident()
    return run_in_progress(folder)


def refuse_in_progress(folder: Path, what: str = "RUN_DIR") -> None:
    """A one-line UsageError when a run is still writing `folder` (a report of it would read a run that
    has not ended as one that crashed)."""
    if Path(folder).is_dir() and run_in_progress(Path(folder)):
        raise UsageError(f"{what} {folder} is being written by a run in progress; wait for it to end "
                         "(its summary.json is rewritten every minute meanwhile)")


PARTIAL_SUFFIX = ".partial"  # what a file being written is called until it is whole


@contextlib.contextmanager
def atomic_file(path: str | Path, mode: str = "w", **open_kwargs: Any) -> Iterator[IO[Any]]:
    """`with atomic_file(path) as fh: fh.write(...)`: the writes go to a temporary file in the same folder,
    which replaces `path` when the block ends without an error (fsync'd, then renamed); on any error it
    is removed and `path` is left as it was. `mode` is "w" or "wb"; `open_kwargs` go to `open`."""
    path = Path(path)
    refuse_link(path)  # a link planted in the output's place: its target would be overwritten
    if path.exists() and not path.is_file():  # /dev/full: renaming over it would replace the device itself
        raise UsageError(f"{path} is not a regular file (a device, a FIFO or a folder); write to a file")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=PARTIAL_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, mode, **open_kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


LINK_REFUSED = ("is a symbolic link; sm-locust does not write through a link it did not make: "
                "remove the link or choose another path")


def refuse_link(path: str | Path, flag: str = "") -> None:
    """A one-line UsageError when `path` itself is a symbolic link (lstat: the link is not followed)."""
    if os.path.islink(path):
        raise UsageError(f"{flag + ' ' if flag else ''}{path} {LINK_REFUSED}")


def refuse_links_in(folder: str | Path, names: Iterable[str], flag: str = "--out") -> None:
    """`refuse_link` for each output another program (Locust) will write as `folder`/name."""
    for name in names:
        refuse_link(Path(folder) / name, flag)


def open_output(path: str | Path, mode: str = "wb", **open_kwargs: Any) -> IO[Any]:
    """Open a file written as it grows (a log, timeline.jsonl) without following a link in its place
    (O_NOFOLLOW): one-line UsageError instead. `mode` is "w", "wb", "a" or "ab"."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    flags |= os.O_APPEND if mode.startswith("a") else os.O_TRUNC

    def opener(name: str, _flags: int) -> int:
        try:
            return os.open(name, flags, 0o666)
        except OSError as exc:
            if exc.errno == errno.ELOOP and os.path.islink(name):
                raise UsageError(f"{name} {LINK_REFUSED}") from None
            raise
    return open(path, mode, opener=opener, **open_kwargs)


def write_atomic(path: str | Path, data: str | bytes, encoding: str = "utf-8") -> Path:
    """`data` into `path` atomically (see `atomic_file`)."""
    if isinstance(data, bytes):
        with atomic_file(path, "wb") as fh:
            fh.write(data)
    else:
        with atomic_file(path, "w", encoding=encoding, newline="") as fh:
            fh.write(data)
    return Path(path)


def promote(partial: str | Path, path: str | Path, whole: Callable[[Path], bool]) -> bool:
    """Rename `partial` (a file another program wrote) to `path` when `whole(partial)` says it is complete;
    else remove it and leave `path` alone. True when promoted."""
    partial, path = Path(partial), Path(path)
    if not partial.is_file():
        return False
    try:
        if whole(partial):
            os.replace(partial, path)
            return True
    except OSError:
        pass
    with contextlib.suppress(OSError):
        partial.unlink()
    return False


def _umask() -> int:
    """This process's umask, read without changing it (mkstemp makes 0600 files; a run folder's files are
    as readable as any other); 0o022 where /proc does not say."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022
