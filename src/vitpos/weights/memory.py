"""Refuse a safetensors file whose tensors cannot fit in memory, from its header, before allocating.

A safetensors file starts with the byte length of a JSON header that lists every tensor's byte
range. A file can state ranges of any size over sparse (unwritten) disk blocks, so its size on
disk proves nothing; the ranges are summed and checked against the machine's memory (as the
model-size checks do) before a byte of tensor data is read or the file is mapped. Under an
address-space limit (``ulimit -v``), reading maps the whole file and copies its tensors, so the
two together must fit in the address space the process has left.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from ..errors import CheckpointError
from ..memory import AllocationTooLarge, address_room, check_fits, format_bytes

__all__ = ["MAX_HEADER_BYTES", "safetensors_bytes", "check_safetensors_fit"]

MAX_HEADER_BYTES = 100_000_000
"""The largest header the safetensors format allows."""


def _damaged(file: Path, what: str) -> CheckpointError:
    return CheckpointError(f"checkpoint {file} is truncated or corrupt ({what}); download or copy it again")


def safetensors_bytes(file: Path) -> int:
    """The bytes the tensors of ``file`` occupy, as its header states them."""
    with open(file, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise _damaged(file, "shorter than a safetensors header")
        (length,) = struct.unpack("<Q", head)
        if length > MAX_HEADER_BYTES:
            raise _damaged(file, f"its header claims {length} bytes")
        text = f.read(length)
    try:
        header = json.loads(text)
        ranges = [v["data_offsets"] for k, v in header.items() if k != "__metadata__"]
        return sum(int(end) - int(start) for start, end in ranges)
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        raise _damaged(file, f"its header is not a safetensors header: {type(err).__name__}") from None


def check_safetensors_fit(file: Path) -> None:
    """Raise :class:`~vitpos.memory.AllocationTooLarge` if the tensors of ``file`` exceed this machine's memory, or
    the file and its tensors the address space left under a limit."""
    stated = safetensors_bytes(file)
    fix = (
        "the file's header states tensors larger than any model vitpos builds: it is damaged or forged, or was "
        "written for a larger machine"
    )
    check_fits(f"loading {file}", stated, fix)
    room = address_room()
    needed = file.stat().st_size + stated  # the mapped file, then its tensors copied out
    if room is not None and needed > room[0]:
        raise AllocationTooLarge(
            f"loading {file} would need at least {format_bytes(needed)} of address space (the file mapped, its "
            f"tensors copied), more than the {format_bytes(room[0])} this process has left under its limit of "
            f"{format_bytes(room[1])} (ulimit -v); raise the limit, or load it where there is room (a header stating "
            "more than any model vitpos builds is damaged or forged)"
        )
