"""Whether a process is still running: temporary files named after their writer's process id are removed only
when that process is gone (it was killed before it could remove them itself)."""

from __future__ import annotations

import os

__all__ = ["alive"]


def alive(pid: int) -> bool:
    """True while process ``pid`` runs (another user's too); False for this process's own id (a leftover of an
    earlier process that had it)."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True
