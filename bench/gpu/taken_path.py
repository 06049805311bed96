"""Which attention path calls took: the policy's choices and the fallbacks of forced paths, recorded."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from vitpos.attention import kernel

FALLBACK = "cannot compute this call"
"""What the kernel's warning says when a forced path falls back to the policy's choice."""


class TakenPaths:
    """The paths the attention calls inside a :func:`recording` block took."""

    def __init__(self, forced: str | None) -> None:
        self.forced = forced
        self.chosen: set[str] = set()
        self.fell_back = False

    @property
    def label(self) -> str:
        """The forced path where every call took it, else the policy's choices ('?' if none was seen)."""
        if self.forced is not None and not self.fell_back:
            return self.forced
        return "+".join(sorted(self.chosen)) or "?"


@contextmanager
def recording(forced: str | None = None) -> Iterator[TakenPaths]:
    """Record the policy's choice of every attention call (through the kernel's ``choose_path``)
    and whether a ``forced`` path fell back; fallback warnings are kept from the console."""
    taken = TakenPaths(forced)
    original = getattr(kernel, "choose_path", None)

    def choose(request):
        assert original is not None
        chosen = original(request)
        taken.chosen.add(chosen)
        return chosen

    if original is not None:  # a kernel that chooses otherwise leaves the label '?'
        kernel.choose_path = choose
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield taken
        taken.fell_back = any(FALLBACK in str(w.message) for w in caught)
    finally:
        if original is not None:
            kernel.choose_path = original
