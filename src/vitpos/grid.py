"""Token grids: sizes, coordinates, offsets and resampling of per-cell tables (pure functions)."""

from __future__ import annotations

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
