"""Fitting a stored table to another size on load: timm's way, or the way the model resamples at run time.

``"timm"`` (the default for timm, DeiT, iRPE, LaPE and Swin files) reproduces what timm does when
it loads such a file into a model of another size: ``pos_embed`` is resampled bicubically *with*
antialias (PyTorch's antialiased kernel, which differs from the plain bicubic one even when
upsampling), and a Swin bias table is resized geometrically (the BEiT scheme: the stored
offsets are spread over the new range on a geometric progression, then interpolated
bilinearly per head). ``"model"`` (the default for vitpos and PVT files) uses the model's own
run-time resampling: bicubic without antialias, the same function a model applies to its
table at another input size, so a 224 checkpoint in a 384 model gives the same logits as the
224 model on 384 inputs; Swin tables are resampled bicubically.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F

from ..grid import Grid, map_to_tokens, resample_table, tokens_to_map

__all__ = ["RESIZES", "Resize", "fit_bias_table", "fit_position_table"]

Resize = Literal["timm", "model"]
RESIZES: tuple[Resize, ...] = ("timm", "model")


def fit_position_table(table: torch.Tensor, stored: Grid, native: Grid, resize: Resize) -> torch.Tensor:
    """A (1, H*W, D) table stored for grid ``stored`` at the grid ``native``."""
    if resize == "model":
        return resample_table(table, stored, native)
    work = torch.promote_types(table.dtype, torch.float32)
    maps = tokens_to_map(table.to(work), stored)
    out = F.interpolate(maps, size=tuple(native), mode="bicubic", align_corners=False, antialias=True)
    return map_to_tokens(out).to(table.dtype)


def fit_bias_table(table: torch.Tensor, side: int, resize: Resize) -> torch.Tensor:
    """A (heads, S*S) table of offsets on an S x S square, resized to ``side`` x ``side``."""
    stored = math.isqrt(table.shape[-1])
    maps = table.to(torch.float64).reshape(-1, stored, stored)
    if resize == "model":
        out = F.interpolate(maps[None], size=(side, side), mode="bicubic", align_corners=False)[0]
    else:
        weights = _geometric_weights(stored, side)
        out = weights @ maps @ weights.T
    return out.reshape(table.shape[0], side * side).to(table.dtype)


def _geometric_offsets(stored: int, side: int) -> torch.Tensor:
    """Where the ``stored`` offsets lie on the new axis: steps growing by a ratio q, the first of 1,
    whose ``stored // 2`` steps reach ``side // 2`` (q found by bisection in [1.01, 1.5], as BEiT)."""
    half = stored // 2
    low, high = 1.01, 1.5
    while high - low > 1e-6:
        q = (low + high) / 2
        if (1 - q**half) / (1 - q) > side // 2:
            high = q
        else:
            low = q
    steps = torch.tensor([q**i for i in range(half)], dtype=torch.float64)
    reach = torch.cumsum(steps, 0)
    return torch.cat([-reach.flip(0), torch.zeros(1, dtype=torch.float64), reach])


def _geometric_weights(stored: int, side: int) -> torch.Tensor:
    """(side, stored): linear interpolation from the geometric offsets to the integers, clamped at the ends."""
    source = _geometric_offsets(stored, side)
    target = torch.arange(side, dtype=torch.float64) - side // 2
    right = torch.bucketize(target, source).clamp(max=stored - 1)
    left = (right - 1).clamp(min=0)
    to_left = (target - source[left]).clamp(min=0)
    to_right = (source[right] - target).clamp(min=0)
    exact = (to_left == 0) & (to_right == 0)
    to_left, to_right = to_left.masked_fill(exact, 1.0), to_right.masked_fill(exact, 1.0)
    weights = torch.zeros(side, stored, dtype=torch.float64)
    rows = torch.arange(side)
    weights.index_put_((rows, left), to_right / (to_left + to_right), accumulate=True)
    weights.index_put_((rows, right), to_left / (to_left + to_right), accumulate=True)
    return weights
