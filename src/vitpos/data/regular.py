"""Files a user names that must be regular files: what a path is when it is not one, and a bounded read.

A named pipe would block a plain ``read`` for ever, and a device such as ``/dev/zero`` would fill
memory; both are refused, naming the path and what it is, before anything is read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import VitposError

__all__ = ["not_a_file", "read_regular_file"]

_KINDS = {stat.S_ISDIR: "a folder", stat.S_ISFIFO: "a named pipe (FIFO)", stat.S_ISCHR: "a character device",
          stat.S_ISBLK: "a block device", stat.S_ISSOCK: "a socket"}  # fmt: skip


def _kind(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    return next((what for test, what in _KINDS.items() if test(mode)), "not a regular file")


def not_a_file(path: Path) -> str | None:
    """What ``path`` is when it is not a regular file (None: it is one); a link is followed."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return f"a link to {os.readlink(path)!r}, which does not exist" if path.is_symlink() else "missing"
    except OSError as err:
        return f"unreadable ({err.strerror or err})"
    return _kind(mode)


def read_regular_file(path: Path, limit: int, what: str) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit``; an error naming ``what`` and ``path`` otherwise."""
    odd = not_a_file(path)
    if odd is not None:
        raise VitposError(f"{what} {path} is {odd}, not a regular file; give a file of its own")
    try:
        # non-blocking: a pipe put in its place after the check above is refused, not waited on
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as err:
        raise VitposError(f"{what} {path} cannot be read ({err.strerror or err})") from None
    with os.fdopen(fd, "rb") as f:
        odd = _kind(os.fstat(fd).st_mode)
        if odd is not None:
            raise VitposError(f"{what} {path} is {odd}, not a regular file; give a file of its own")
        raw = f.read(limit + 1)
    if len(raw) > limit:
        raise VitposError(f"{what} {path} is larger than {limit} bytes; is it the right file?")
    return raw
