"""Token grids: sizes, coordinates, offsets and resampling of per-cell tables (pure functions), and
:class:`GridCache`, the one cache of vitpos: a per-grid memo for tensors that are pure functions of
the grid and some parameters.

Every module computes what it needs from its parameters at each call; a :class:`GridCache`
holds a result only where ``python -m bench.attention.caches`` shows that recomputing it costs at least
1% of an inference forward pass (BENCHMARKS.md, "Per-grid caches"):

* the bucket ids of a grid (:mod:`vitpos.encodings.relative.buckets`, shared by every layer): 10-18% of a
  DeiT-S forward with a bucketed relative encoding;
* the dense bias of a bias-type relative encoding (:class:`vitpos.encodings.relative.base.RelativeBias`, LaPE's
  normalised bias included): 2-3% (iRPE, Swin), 10-12% with LaPE's normalisation;
* RoPE's cosines and sines (:class:`vitpos.encodings.relative.rope.Rope2d`): about 2%;
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
import torch.nn.functional as F

from .errors import VitposError

__all__ = [
    "Grid",
    "tracing",
    "patch_grid",
    "grid_coords",
    "grid_offsets",
    "resample_table",
    "tokens_to_map",
    "map_to_tokens",
    "GridCache",
]

Grid = tuple[int, int]
"""(H, W): rows then columns, counted in patches; symbolic sizes (``torch.SymInt``) while tracing."""


def tracing() -> bool:
    """True under ``torch.compile`` and ``torch.export``, where grid sizes may be symbolic.

    Code that would branch on a grid size (a shortcut at the native grid, a per-grid cache)
    takes its general path then, so the traced graph holds for every size.
    """
    return torch.compiler.is_compiling()


def patch_grid(image_hw: tuple[int, int], patch_size: int, *, pad: bool = False) -> Grid:
    """The grid of an image of size ``image_hw``; raises if not divisible and ``pad`` is off."""
    h, w = image_hw
    if not pad and (h % patch_size or w % patch_size):
        raise VitposError(
            f"image size {h}x{w} is not divisible by the patch size {patch_size}; resize the input "
            f"to a multiple of {patch_size} or build the model with pad_to_patch=True"
        )
    # ceiling division written as floor division of a sum: simpler for symbolic sizes
    return ((h + patch_size - 1) // patch_size, (w + patch_size - 1) // patch_size)


def grid_coords(
    grid: Grid, *, device: torch.device | str | None = None, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Cell coordinates (x, y) = (column, row) in row-major token order; shape (H*W, 2)."""
    h, w = grid
    ys, xs = torch.meshgrid(
        torch.arange(h, device=device, dtype=dtype), torch.arange(w, device=device, dtype=dtype), indexing="ij"
    )
    return torch.stack([xs.reshape(-1), ys.reshape(-1)], dim=-1)


def grid_offsets(grid: Grid, *, device: torch.device | str | None = None) -> torch.Tensor:
    """Integer offsets (dy, dx) from key j to query i; shape (N, N, 2) with N = H*W."""
    h, w = grid
    ys, xs = torch.meshgrid(torch.arange(h, device=device), torch.arange(w, device=device), indexing="ij")
    pos = torch.stack([ys.reshape(-1), xs.reshape(-1)], dim=-1)
    return pos[:, None, :] - pos[None, :, :]


def tokens_to_map(x: torch.Tensor, grid: Grid) -> torch.Tensor:
    """(B, H*W, C) tokens -> (B, C, H, W) map."""
    b, n, c = x.shape
    h, w = grid
    if n != h * w:
        raise ValueError(f"{n} tokens do not fill a {h}x{w} grid")
    maps = x.transpose(1, 2).reshape(b, c, h, w)
    # a channels-last view; while tracing, a contiguous copy: a convolution's layout choice on the
    # view depends on whether the (symbolic) batch is 1
    return maps.contiguous() if tracing() else maps


def map_to_tokens(x: torch.Tensor) -> torch.Tensor:
    """(B, C, H, W) map -> (B, H*W, C) tokens."""
    return x.flatten(2).transpose(1, 2)


def resample_table(table: torch.Tensor, old_grid: Grid, new_grid: Grid) -> torch.Tensor:
    """Resize a (1, H*W, D) per-cell table bicubically (no antialias, so it exports); identity if equal.

    While tracing the table is always interpolated (to the same size it is an exact copy), so the
    graph does not depend on whether the grid is the native one.
    """
    if not tracing() and tuple(old_grid) == tuple(new_grid):
        return table
    maps = tokens_to_map(table, old_grid)
    # interpolate in float32 at least: bicubic is not implemented for half on every backend
    work_dtype = torch.promote_types(table.dtype, torch.float32)
    out = F.interpolate(maps.to(work_dtype), size=tuple(new_grid), mode="bicubic", align_corners=False)
    return map_to_tokens(out).to(table.dtype)


T = TypeVar("T")


class GridCache(Generic[T]):
    """Memoise ``compute()`` per key while the given parameters are unchanged.

    An entry is keyed by the caller's key plus the in-place version counter of every
    parameter, so an optimiser step or ``load_state_dict`` invalidates it; it also keeps a copy of
    the parameters and is used only while they still equal it, since a write through
    ``param.data`` (``param.data.copy_(...)``) changes no version counter. Comparing is cheap on
    the CPU; on another device it would wait for the device, so values of parameters held there
    are recomputed, not cached (keys of the grid alone are cached everywhere). Nothing is cached
    while autograd records (the result must stay in the graph), while compiling or exporting
    (keys would hold symbolic sizes, and a traced graph must compute the value for every size),
    or under a ``torch.func`` transform (vmapped parameters are wrappers, one per call).
    """

    def __init__(self, maxsize: int = 8) -> None:
        self.maxsize = maxsize
        self._entries: OrderedDict[Hashable, tuple[T, tuple[torch.Tensor, ...]]] = OrderedDict()

    def get(self, key: Hashable, compute: Callable[[], T], params: Iterable[torch.Tensor] = ()) -> T:
        """Return the cached tensor for ``key`` or compute and store it."""
        params = tuple(params)
        if (
            tracing()
            or (torch.is_grad_enabled() and any(p.requires_grad for p in params))
            or any(torch._C._functorch.is_functorch_wrapped_tensor(p) for p in params)
            or any(p.device.type != "cpu" for p in params)
        ):
            return compute()
        full_key = (key, tuple(p._version for p in params), tuple(p.data_ptr() for p in params))
        hit = self._entries.get(full_key)
        if hit is not None and all(torch.equal(p.detach(), seen) for p, seen in zip(params, hit[1], strict=True)):
            self._entries.move_to_end(full_key)
            return hit[0]
        value = compute()
        self._entries[full_key] = (value, tuple(p.detach().clone() for p in params))
        self._entries.move_to_end(full_key)
        if len(self._entries) > self.maxsize:
            self._entries.popitem(last=False)
        return value
