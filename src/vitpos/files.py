"""JSON written crash-safely (temporary file, fsync, rename), for results and cell files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .engine.atomic import write_atomic

__all__ = ["write_json"]


def write_json(path: str | Path, data: Any, *, indent: int | None = 2) -> Path:
    """Write ``data`` as JSON, creating the folder; readers see the old file or the new one, never a part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(data, indent=indent) + "\n")
    return path
