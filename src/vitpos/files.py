"""Crash-safe file writes (a temporary file, flushed to disk, renamed into place), JSON written so,
and the check that a command may write where it was told to.

Every write goes through :func:`replacing`, which tells the active :class:`Watcher` (if any) before
and after: :mod:`vitpos.ownership` uses it to refuse replacing a file a command did not write and
to record each file a command wrote."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Protocol

from .errors import VitposError

__all__ = [
    "Watcher",
    "watching",
    "watch_for_good",
    "watcher",
    "fsync_path",
    "replacing",
    "write_atomic",
    "write_json",
    "check_destination",
]


class Watcher(Protocol):
    """What is told of each file written through :func:`replacing`."""

    def before(self, path: Path) -> None:
        """Called before anything is written: raise to refuse writing ``path``."""

    def after(self, path: Path) -> None:
        """Called once ``path`` holds the new file."""


_WATCHER: ContextVar[Watcher | None] = ContextVar("vitpos_file_watcher", default=None)


@contextmanager
def watching(watcher: Watcher | None) -> Iterator[None]:
    """Tell ``watcher`` of every file written through :func:`replacing` inside this block."""
    token = _WATCHER.set(watcher)
    try:
        yield
    finally:
        _WATCHER.reset(token)


def watch_for_good(watcher: Watcher | None) -> None:
    """Tell ``watcher`` of the files written in this context from now on (a worker process's whole life)."""
    _WATCHER.set(watcher)


def watcher() -> Watcher | None:
    """The watcher told of the files written now (None: none)."""
    return _WATCHER.get()


def fsync_path(path: Path) -> None:
    """Flush a file or a folder entry to disk (folders: so a rename inside them survives a crash)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` (same suffix) to write; on success it is flushed and renamed
    onto ``path``, on any error removed, so readers see the old file or the new one, never a part."""
    watch = _WATCHER.get()
    if watch is not None:
        watch.before(path)
    tmp = path.with_name(f".{path.stem}.tmp-{os.getpid()}{path.suffix}")
    try:
        yield tmp
        fsync_path(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_path(path.parent)
    if watch is not None:
        watch.after(path)


def write_atomic(path: Path, data: str | bytes) -> None:
    """Replace ``path`` with ``data`` so that readers see the old or the new file, never a part."""
    with replacing(Path(path)) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)


def write_json(path: str | Path, data: Any, *, indent: int | None = 2) -> Path:
    """Write ``data`` as JSON, creating the folder; readers see the old file or the new one, never a part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(data, indent=indent) + "\n")
    return path


def check_destination(path: Path, *, folder: bool, force: bool, option: str = "--force") -> None:
    """Raise before any work if a command may not write ``path``: a file (``folder=False``) that
    exists, or a folder that holds anything, unless ``force``; the wrong kind; an unwritable place."""
    path = Path(path)
    if path.exists() and path.is_dir() != folder:
        wanted = "a folder" if folder else "a file name"
        raise VitposError(f"{path} is {'a folder' if path.is_dir() else 'a file'}; give {wanted}")
    if path.exists() and not force and (not folder or any(path.iterdir())):
        raise VitposError(f"{path} {_holds(path)}; choose another destination, or pass {option} to replace it")
    place = path if path.is_dir() else path.parent
    while not place.exists() and place != place.parent:
        place = place.parent
    if not place.is_dir():
        raise VitposError(f"cannot write {path}: {place} is a file, not a folder; choose another destination")
    try:  # try it: permissions, read-only mounts and special file systems all answer here
        fd, probe = tempfile.mkstemp(prefix=".vitpos-write-test-", dir=place)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise VitposError(
            f"cannot write {path}: folder {place} does not accept new files ({err.strerror or err}); "
            "choose another destination"
        ) from None


def _holds(path: Path) -> str:
    """What an existing destination holds, in words."""
    if not path.is_dir():
        return "already exists"
    if (path / "checkpoints").is_dir():
        return "holds a training run (checkpoints/)"
    names = sorted(p.name for p in path.iterdir())
    return f"already holds {', '.join(names[:5])}{', ...' if len(names) > 5 else ''}"
