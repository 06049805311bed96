"""Estimate what a request would allocate and refuse it before allocating when it cannot fit.

A typo (``--resolutions 50000``, ``--grid 100000x100000``, ``embed_dim: 1048576``) should be
an error naming the size and the limit, not a minutes-long swap or an allocator's traceback.
The estimates are lower bounds (one tensor the request must hold), so nothing that fits is refused.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Protocol

import torch

from .errors import VitposError

__all__ = [
    "AllocationTooLarge",
    "memory_limit",
    "address_room",
    "check_fits",
    "format_bytes",
    "model_bytes",
    "batch_bytes",
]

FLOAT_BYTES = 4


class AllocationTooLarge(VitposError):
    """A request whose estimated memory exceeds what the device has."""


def memory_limit(device: torch.device | str | None = None) -> int:
    """Bytes of memory on ``device``: a CUDA device's total memory, else the machine's physical memory."""
    device = torch.device(device if device is not None else "cpu")
    if device.type == "cuda" and torch.cuda.is_available():
        return int(torch.cuda.get_device_properties(device).total_memory)
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # no sysconf (Windows): do not refuse
        return 2**62


def address_room() -> tuple[int, int] | None:
    """(bytes of address space this process may still map, its limit) under an address-space limit
    (``ulimit -v``, RLIMIT_AS); None without one or where it cannot be read."""
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        if limit == resource.RLIM_INFINITY:
            return None
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (ImportError, OSError, ValueError):
        return None
    return max(limit - used, 0), limit


def format_bytes(n: float) -> str:
    """``n`` bytes as a short human size (``1.5 TiB``)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    raise AssertionError("unreachable")


def check_fits(what: str, nbytes: float, fix: str, device: torch.device | str | None = None) -> None:
    """Raise :class:`AllocationTooLarge` if ``nbytes`` (the estimate for ``what``) exceeds ``device``'s memory."""
    limit = memory_limit(device)
    if nbytes > limit:
        where = "this machine" if device is None or torch.device(device).type == "cpu" else str(device)
        raise AllocationTooLarge(
            f"{what} would need at least {format_bytes(nbytes)}, more than the {format_bytes(limit)} of memory "
            f"on {where}; {fix}"
        )


class _Width(Protocol):
    """A stage's depth and token width."""

    @property
    def depth(self) -> int: ...
    @property
    def embed_dim(self) -> int: ...


class StageSizes(Protocol):
    """What the estimates read of a stage (``vitpos.config.StageGeometry`` has it)."""

    @property
    def context(self) -> _Width: ...
    @property
    def mlp_ratio(self) -> float: ...
    @property
    def stride(self) -> int: ...


def model_bytes(stages: Sequence[StageSizes]) -> int:
    """A lower bound on the float32 weights of a transformer with these stages: per block, the
    attention's 4 D^2 and the MLP's 2 r D^2."""
    return FLOAT_BYTES * sum(
        s.context.depth * math.ceil((4 + 2 * s.mlp_ratio) * s.context.embed_dim**2) for s in stages
    )


def batch_bytes(stages: Sequence[StageSizes], in_chans: int, batch: int, image_hw: tuple[int, int]) -> int:
    """A lower bound on the memory of one forward pass over ``batch`` images of ``image_hw``: the
    input, or the first stage's tokens, whichever is larger."""
    h, w = image_hw
    first = stages[0]
    tokens = math.ceil(h / first.stride) * math.ceil(w / first.stride) * first.context.embed_dim
    return FLOAT_BYTES * batch * max(in_chans * h * w, tokens)
