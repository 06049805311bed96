"""Where ``torch.compile`` keeps what it compiled when vitpos compiles: a folder only this user can write.

Inductor's caches (FX graphs, autotuning results) and Triton's kernel cache hold pickles and
generated code that a later compile loads and runs. Their default folder, ``torchinductor_$USER``
in the system's temporary folder, can be created first by another user of the machine, who could
then plant code there. So before vitpos compiles anything (``--compile``, FlexAttention, the
compiled 2-D rotation), each cache not set by the user goes to ``$XDG_CACHE_HOME/vitpos/compile``
(by default ``~/.cache/vitpos/compile``): ``inductor/`` and ``triton/``, in a folder created with
mode 0700 and checked, at the first compile of a process, to be a folder (not a link) that belongs to this user and
that no one else can write to. A ``TORCHINDUCTOR_CACHE_DIR`` or ``TRITON_CACHE_DIR`` the user set
is used as set.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from .errors import VitposError

__all__ = ["compile_cache_dir", "use_private_compile_caches", "compile_privately"]

_CACHES = {"TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton"}
"""The environment variable of each cache, and its folder in :func:`compile_cache_dir`."""


def compile_cache_dir() -> Path:
    """The private folder of vitpos's compile caches: ``$XDG_CACHE_HOME/vitpos/compile``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vitpos" / "compile"


def _check_private(folder: Path) -> None:
    """Raise unless ``folder`` is a folder of this user's that no one else can write to."""
    info = os.lstat(folder)
    fix = (
        f"; torch.compile would run code planted there: run chmod 700 {folder} (or remove it), or set "
        "TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR to a folder of your own"
    )
    if not stat.S_ISDIR(info.st_mode):
        raise VitposError(f"compile cache {folder} is not a folder (a link or a file){fix}")
    if info.st_uid != os.getuid():
        raise VitposError(f"compile cache {folder} belongs to another user (uid {info.st_uid}){fix}")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise VitposError(
            f"compile cache {folder} can be written by other users (mode {oct(stat.S_IMODE(info.st_mode))}){fix}"
        )


def use_private_compile_caches() -> Path | None:
    """Point each compile cache the user did not set at the private folder, created and checked; returns the
    folder (None: the user set both)."""
    unset = [name for name in _CACHES if not os.environ.get(name)]
    if not unset:
        return None
    folder = compile_cache_dir()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    _check_private(folder)
    for name in unset:
        os.environ[name] = str(folder / _CACHES[name])
    return folder


def compile_privately(fn: Callable, **options: Any) -> Callable:
    """``torch.compile(fn, **options)``, its caches in the private folder (:func:`use_private_compile_caches`)."""
    use_private_compile_caches()
    return torch.compile(fn, **options)
