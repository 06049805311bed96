"""A small per-grid memo for tensors that are pure functions of the grid and some parameters."""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Hashable, Iterable

import torch

from ..grid import tracing

__all__ = ["GridCache"]


class GridCache:
    """Memoise ``compute()`` per key while the given parameters are unchanged.

    An entry is keyed by the caller's key plus the in-place version counter of every
    parameter, so an optimiser step or ``load_state_dict`` invalidates it. Nothing is cached
    while autograd records (the result must stay in the graph), while compiling or exporting
    (keys would hold symbolic sizes, and a traced graph must compute the value for every size),
    or under a ``torch.func`` transform (vmapped parameters are wrappers, one per call).
    """

    def __init__(self, maxsize: int = 8) -> None:
        self.maxsize = maxsize
        self._entries: OrderedDict[Hashable, torch.Tensor] = OrderedDict()

    def get(self, key: Hashable, compute: Callable[[], torch.Tensor], params: Iterable[torch.Tensor] = ()) -> torch.Tensor:
        """Return the cached tensor for ``key`` or compute and store it."""
        params = tuple(params)
        if tracing() or (
            torch.is_grad_enabled() and any(p.requires_grad for p in params)
        ) or any(torch._C._functorch.is_functorch_wrapped_tensor(p) for p in params):
            return compute()
        full_key = (key, tuple(p._version for p in params), tuple(p.data_ptr() for p in params))
        hit = self._entries.get(full_key)
        if hit is not None:
            self._entries.move_to_end(full_key)
            return hit
        value = compute()
        self._entries[full_key] = value
        if len(self._entries) > self.maxsize:
            self._entries.popitem(last=False)
        return value

    def clear(self) -> None:
        """Drop every entry."""
        self._entries.clear()
