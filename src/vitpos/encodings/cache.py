"""The one cache of vitpos: a per-grid memo for tensors that are pure functions of the grid and
some parameters.

Every module computes what it needs from its parameters at each call; a :class:`GridCache`
holds a result only where ``python -m bench.caches`` shows that recomputing it costs at least
1% of an inference forward pass (BENCHMARKS.md, "Per-grid caches"):

* the bucket ids of a grid (:mod:`.relative.buckets`, shared by every layer): 10-18% of a
  DeiT-S forward with a bucketed relative encoding;
* the dense bias of a bias-type relative encoding (:class:`.relative.base.RelativeBias`, LaPE's
  normalised bias included): 2-3% (iRPE, Swin), 10-12% with LaPE's normalisation;
* RoPE's cosines and sines (:class:`.relative.rope.Rope2d`): about 2%;
* the unshared join's per-layer tables resampled to another grid: 7-8% at 288 px;
* Swin's shifted-window masks (:class:`vitpos.models.windows.WindowAttention`): 2-4% of a
  Swin-T forward.

Absolute encodings (fixed, learned, learnable sinusoids, Fourier features) and LaPE's per-layer
normalised encodings cost 0.1-0.3% to recompute and are not cached. A cache is invisible to its
callers: nothing outside the module that owns it builds a key.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

import torch

from ..grid import tracing

__all__ = ["GridCache"]

T = TypeVar("T")


class GridCache(Generic[T]):
    """Memoise ``compute()`` per key while the given parameters are unchanged.

    An entry is keyed by the caller's key plus the in-place version counter of every
    parameter, so an optimiser step or ``load_state_dict`` invalidates it. Nothing is cached
    while autograd records (the result must stay in the graph), while compiling or exporting
    (keys would hold symbolic sizes, and a traced graph must compute the value for every size),
    or under a ``torch.func`` transform (vmapped parameters are wrappers, one per call).
    """

    def __init__(self, maxsize: int = 8) -> None:
        self.maxsize = maxsize
        self._entries: OrderedDict[Hashable, T] = OrderedDict()

    def get(self, key: Hashable, compute: Callable[[], T], params: Iterable[torch.Tensor] = ()) -> T:
        """Return the cached tensor for ``key`` or compute and store it."""
        params = tuple(params)
        if (
            tracing()
            or (torch.is_grad_enabled() and any(p.requires_grad for p in params))
            or any(torch._C._functorch.is_functorch_wrapped_tensor(p) for p in params)
        ):
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
