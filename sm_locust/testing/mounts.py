"""A tmpfs on demand: a full, small or read-only file system for the output-place checks.

Shared by tests/cli/test_bad_input.py and the probes under bench/ (which run outside pytest and must not
import the tests), so it lives in the package and imports only the standard library. Mounting needs
root; `mount_tmpfs` returns False where it cannot mount, `unmount` undoes it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def mount_tmpfs(target: Path, size: str, read_only: bool = False, fill: int = 0, copy: Path | None = None) -> bool:
    """Mount a tmpfs of `size` on `target` (created), holding a copy of the folder `copy` and `fill`
    bytes of filler, remounted read-only when asked; False when the mount is refused (not root)."""
    target.mkdir(parents=True, exist_ok=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(target)], capture_output=True,
                      check=False).returncode:
        return False
    if copy is not None:
        shutil.copytree(copy, target / copy.name)
    if fill:
        (target / "filler").write_bytes(b"x" * fill)
    if read_only:
        subprocess.run(["mount", "-o", "remount,ro", str(target)], check=True)
    return True


def unmount(target: Path) -> None:
    """Lazily unmount a tmpfs `mount_tmpfs` made (nothing when it is not mounted)."""
    subprocess.run(["umount", "-l", str(target)], capture_output=True, check=False)
