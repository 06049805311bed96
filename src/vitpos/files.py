"""Crash-safe file writes (a temporary file, flushed to disk, renamed into place) and JSON written so."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["fsync_path", "write_atomic", "write_json"]


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


def write_json(path: str | Path, data: Any, *, indent: int | None = 2) -> Path:
    """Write ``data`` as JSON, creating the folder; readers see the old file or the new one, never a part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(data, indent=indent) + "\n")
    return path
