"""The Swin-style windowed host (Liu et al., ICCV 2021) with the four position slots per stage.

A 4 x 4 strided convolution and LayerNorm make the stage-0 tokens; later stages start with
2 x 2 patch merging (concatenate each 2 x 2 neighbourhood, LayerNorm, linear map without
bias). Blocks attend within M x M windows, every second block with windows shifted by M/2
(:mod:`.windows`). Swin's relative position bias is the ``relative`` slot (``swin``), built
per stage for one window, so its table has (2M-1)^2 entries per head; any other relative
encoding (iRPE, RoPE, ...) goes in the same way, and LaPE's join normalises the bias per
block. Absolute encodings, joins and PEGs are built per stage at the stage's grid.

``swin_v2=True`` gives Swin V2's blocks (Liu et al., CVPR 2022; the released code's forward): each
branch normalised after it, ``x + norm1(attn(x))`` and ``x + norm2(mlp(x))``, with those norms
starting at zero as in the release (every block starts as the identity); biases on queries and
values only (``attn.q_bias``, ``attn.v_bias``; the keys' is zero); patch merging that normalises
after the reduction; cosine attention with a learned logit scale (``cosine_attention``); shifted
windows masked between regions with the release's -100, not -inf (:class:`.windows.WindowAttention`). Its
position encoding is the continuous bias ``relative='cpb'`` (:mod:`vitpos.encodings.relative.cpb`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..config import SwinConfig
from ..encodings.relative.base import RelativePosition
from ..grid import Grid, map_to_tokens
from ..registry import ARCHITECTURES
from .layers import Block, init_linear
from .pyramid import NormedPatchEmbed, PyramidTransformer
from .windows import WindowAttention

__all__ = ["PatchMerging", "SwinTransformer", "SwinV2Block", "QueryValueBiasAttention", "RELEASED_REGION_MASK"]

RELEASED_REGION_MASK = -100.0
"""Swin's released shifted-window mask: -100 between regions, kept by Swin V2's forward (its logits reach 116)."""


class PatchMerging(nn.Module):
    """Swin's downsampling: each 2x2 neighbourhood's 4C channels -> LayerNorm -> Linear(4C, C_out, no bias);
    ``norm_after`` (Swin V2): Linear, then LayerNorm(C_out)."""

    def __init__(self, in_dim: int, out_dim: int, norm_after: bool = False) -> None:
        super().__init__()
        self.norm_after = norm_after
        self.norm = nn.LayerNorm(out_dim if norm_after else 4 * in_dim)
        self.reduction = init_linear(nn.Linear(4 * in_dim, out_dim, bias=False))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, Grid]:  # B, C, H, W -> (B, H/2*W/2, C_out), grid
        h, w = x.shape[-2:]
        if h % 2 or w % 2:
            raise ValueError(f"patch merging needs an even grid, got {h}x{w}")
        # Swin's channel order: (even row, even col), (odd, even), (even, odd), (odd, odd)
        parts = [x[..., r::2, c::2] for c in (0, 1) for r in (0, 1)]
        merged = torch.cat(parts, dim=1)
        tokens = map_to_tokens(merged)
        tokens = self.norm(self.reduction(tokens)) if self.norm_after else self.reduction(self.norm(tokens))
        return tokens, (merged.shape[-2], merged.shape[-1])


class SwinV2Block(Block):
    """Swin V2's block: ``x + norm1(attn(x))``, ``x + norm2(mlp(x))``, the norms starting at zero (the release)."""

    post_norm = True

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for norm in (self.norm1, self.norm2):
            nn.init.zeros_(norm.weight)


class QueryValueBiasAttention(WindowAttention):
    """Window attention with biases on the queries and values only (Swin V2's ``q_bias``, ``v_bias``)."""

    def __init__(
        self, dim: int, num_heads: int, window_size: int, shifted: bool, qkv_bias: bool = True, **options: Any
    ) -> None:
        super().__init__(dim, num_heads, window_size, shifted, qkv_bias=False, **options)
        self.q_bias = nn.Parameter(torch.zeros(dim)) if qkv_bias else None
        self.v_bias = nn.Parameter(torch.zeros(dim)) if qkv_bias else None

    def projection_bias(self) -> torch.Tensor | None:
        if self.q_bias is None or self.v_bias is None:
            return None
        return torch.cat([self.q_bias, torch.zeros_like(self.q_bias), self.v_bias])


@ARCHITECTURES.register("swin")
class SwinTransformer(PyramidTransformer):
    """Swin: patch merging between stages and (shifted) window attention, slots per stage."""

    config_class = SwinConfig
    cfg: SwinConfig
    norm_eps = 1e-5

    def __init__(self, cfg: SwinConfig) -> None:
        self.block_class = SwinV2Block if cfg.swin_v2 else Block  # read while the stages are built
        super().__init__(cfg)

    def make_downsample(self, stage: int) -> nn.Module:
        cfg = self.cfg
        if stage == 0:
            return NormedPatchEmbed(cfg.patch_size, cfg.in_chans, cfg.embed_dims[0])
        return PatchMerging(cfg.embed_dims[stage - 1], cfg.embed_dims[stage], norm_after=cfg.swin_v2)

    def make_attention(self, stage: int, index: int, relative: RelativePosition | None) -> WindowAttention:
        cfg = self.cfg
        attention = QueryValueBiasAttention if cfg.swin_v2 else WindowAttention
        return attention(
            cfg.embed_dims[stage],
            cfg.num_heads[stage],
            cfg.window,
            shifted=index % 2 == 1,
            qkv_bias=cfg.qkv_bias,
            attn_drop=cfg.attn_drop_rate,
            proj_drop=cfg.drop_rate,
            relative=relative,
            cosine=cfg.cosine,
            region_mask=RELEASED_REGION_MASK if cfg.swin_v2 else float("-inf"),
        )
