"""An OS file lock on a run folder, held for the life of the run that writes it.

A second process that opens the same folder (another ``vitpos train``, or one resumed too
early) stops with a clear error instead of interleaving checkpoints with the first. The lock is
``fcntl.flock`` on ``RUN/.lock``: the kernel drops it when the process dies, ``kill -9``
included, so a crashed run never leaves a stale lock behind.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from ..errors import VitposError

__all__ = ["LOCK_FILE", "RunFolderBusy", "locked_run_folder"]

LOCK_FILE = ".lock"


class RunFolderBusy(VitposError):
    """Another process holds the run folder."""


def _make_folder(run_dir: Path) -> list[Path]:
    """Create ``run_dir`` (and parents); the folders this created, innermost first. Raises a clear error if it
    cannot be a folder."""
    if run_dir.exists() and not run_dir.is_dir():
        raise VitposError(f"run folder {run_dir} is a file, not a folder; choose another --run-dir")
    try:
        created = [folder for folder in (run_dir, *run_dir.parents) if not folder.exists()]
        run_dir.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # a parent is a file
        raise VitposError(
            f"cannot create run folder {run_dir}: a part of the path is a file; choose another --run-dir"
        ) from None
    except PermissionError:
        raise VitposError(
            f"cannot create run folder {run_dir}: permission denied; choose a folder you can write"
        ) from None
    return created


def _remove_empty(folders: list[Path]) -> None:
    """Remove ``folders`` (innermost first) while they are empty: another run may have written into a parent."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


@contextlib.contextmanager
def locked_run_folder(run_dir: str | Path | None) -> Iterator[None]:
    """Hold the lock of ``run_dir`` (created if missing) for the ``with`` block; None locks nothing.

    A folder this call created and that holds nothing but the lock when the block ends (the
    run stopped before writing anything) is removed again, with the parents it created (``runs/``)
    that are left empty.
    """
    if run_dir is None:
        yield
        return
    run_dir = Path(run_dir)
    created = _make_folder(run_dir)
    if not os.access(run_dir, os.W_OK):
        raise VitposError(
            f"run folder {run_dir} is not writable (permission denied); make it writable or choose another --run-dir"
        )
    path = run_dir / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except PermissionError:
        raise VitposError(
            f"run folder {run_dir} is not writable (permission denied); make it writable or choose another --run-dir"
        ) from None
    except OSError as err:
        if err.errno == errno.EROFS:
            raise VitposError(f"run folder {run_dir} is on a read-only file system; choose another --run-dir") from None
        raise
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            raise RunFolderBusy(
                f"run folder {run_dir} is in use by another vitpos process (pid {holder}); wait for it to finish, "
                "or choose another --run-dir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            if created and sorted(os.listdir(run_dir)) == [LOCK_FILE]:
                os.unlink(path)
                _remove_empty(created)
    finally:
        os.close(fd)  # closing the descriptor releases the lock
