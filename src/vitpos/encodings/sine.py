"""DETR's fixed sine encoding (Carion et al. 2020, ``PositionEmbeddingSine(normalize=True)``).

Row and column indices are normalised to (0, 2 pi]: y = 2 pi (i + 1) / H, x = 2 pi (j + 1) / W,
so the encoding spans the same range at every image size. The first D/2 channels encode y, the
last D/2 encode x; within each half channel 2k is sin(t / 10000^(2k / (D/2))) and 2k + 1 the
cosine at the same frequency. DETR computes the indices from its padding mask, normalised over
each image's valid region; in a padded batch vitpos evaluates the encoding at each image's valid
grid (:meth:`vitpos.models.stage.Stage.position_encoding`), which is the same.
"""

from __future__ import annotations

import math

import torch

from ..grid import Grid
from ..registry import ABSOLUTE
from .absolute import FixedTableEncoding
from .base import SlotContext
from .sincos import interleave_sin_cos, sincos_frequencies

__all__ = ["SinePosition", "detr_sine"]


def detr_sine(grid: Grid, dim: int, *, temperature: float = 10000.0) -> torch.Tensor:  # H*W, D
    """DETR's normalised sine table for ``grid``, rows in row-major order, float64."""
    if dim % 4:
        raise ValueError(f"sine needs an embedding width divisible by 4, got {dim}")
    h, w = grid
    half = dim // 2
    freqs = sincos_frequencies(half // 2, 2.0 / half, base=temperature)
    y = torch.arange(1, h + 1, dtype=torch.float64) / h * 2 * math.pi
    x = torch.arange(1, w + 1, dtype=torch.float64) / w * 2 * math.pi
    pos_y = interleave_sin_cos(y[:, None] * freqs)[:, None].expand(h, w, half)
    pos_x = interleave_sin_cos(x[:, None] * freqs)[None].expand(h, w, half)
    return torch.cat([pos_y, pos_x], dim=-1).reshape(h * w, dim)


@ABSOLUTE.register("sine")
class SinePosition(FixedTableEncoding):
    """DETR's sine encoding: y then x, indices normalised to the image (see the module docstring)."""

    def __init__(self, ctx: SlotContext) -> None:
        if ctx.embed_dim % 4:
            raise ValueError(f"sine needs an embedding width divisible by 4, got {ctx.embed_dim}")
        super().__init__(ctx)

    def float64_table(self, grid: Grid, device: torch.device | None = None) -> torch.Tensor:
        return detr_sine(grid, self.embed_dim).to(device)
