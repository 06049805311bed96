"""The Swin-style windowed host (Liu et al., ICCV 2021) with the four position slots per stage.

A 4 x 4 strided convolution and LayerNorm make the stage-0 tokens; later stages start with
2 x 2 patch merging (concatenate each 2 x 2 neighbourhood, LayerNorm, linear map without
bias). Blocks attend within M x M windows, every second block with windows shifted by M/2
(:mod:`.windows`). Swin's relative position bias is the ``relative`` slot (``swin``), built
per stage for one window, so its table has (2M-1)^2 entries per head; any other relative
encoding (iRPE, RoPE, ...) goes in the same way, and LaPE's join normalises the bias per
block. Absolute encodings, joins and PEGs are built per stage at the stage's grid.
"""

from __future__ import annotations

import torch
from torch import nn

from ..config import SwinConfig
from ..encodings.relative.base import RelativePosition
from ..grid import Grid, map_to_tokens
from ..registry import ARCHITECTURES
from .layers import init_linear
from .pyramid import NormedPatchEmbed, PyramidTransformer
from .windows import WindowAttention

__all__ = ["PatchMerging", "SwinTransformer"]


class PatchMerging(nn.Module):
    """Swin's downsampling: each 2x2 neighbourhood's 4C channels -> LayerNorm -> Linear(4C, C_out, no bias)."""

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(4 * in_dim)
        self.reduction = init_linear(nn.Linear(4 * in_dim, out_dim, bias=False))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, Grid]:  # B, C, H, W -> (B, H/2*W/2, C_out), grid
        h, w = x.shape[-2:]
        if h % 2 or w % 2:
            raise ValueError(f"patch merging needs an even grid, got {h}x{w}")
        # Swin's channel order: (even row, even col), (odd, even), (even, odd), (odd, odd)
        parts = [x[..., r::2, c::2] for c in (0, 1) for r in (0, 1)]
        merged = torch.cat(parts, dim=1)
        return self.reduction(self.norm(map_to_tokens(merged))), (merged.shape[-2], merged.shape[-1])


@ARCHITECTURES.register("swin")
class SwinTransformer(PyramidTransformer):
    """Swin: patch merging between stages and (shifted) window attention, slots per stage."""

    config_class = SwinConfig
    cfg: SwinConfig
    norm_eps = 1e-5

    def make_downsample(self, stage: int) -> nn.Module:
        cfg = self.cfg
        if stage == 0:
            return NormedPatchEmbed(cfg.patch_size, cfg.in_chans, cfg.embed_dims[0])
        return PatchMerging(cfg.embed_dims[stage - 1], cfg.embed_dims[stage])

    def make_attention(self, stage: int, index: int, relative: RelativePosition | None) -> WindowAttention:
        cfg = self.cfg
        return WindowAttention(
            cfg.embed_dims[stage],
            cfg.num_heads[stage],
            cfg.window,
            shifted=index % 2 == 1,
            qkv_bias=cfg.qkv_bias,
            attn_drop=cfg.attn_drop_rate,
            proj_drop=cfg.drop_rate,
            relative=relative,
        )
