"""Crash-safe file writes: write a temporary file, flush it to disk, then rename it into place."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["write_atomic", "fsync_path"]


def fsync_path(path: Path) -> None:
    """Flush a file or a folder entry to disk (folders: so a rename inside them survives a crash)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: str | bytes) -> None:
    """Replace ``path`` with ``data`` so that readers see the old or the new file, never a part."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_path(path.parent)
