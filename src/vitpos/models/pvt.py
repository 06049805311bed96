"""The PVT-style pyramid host (Wang et al., ICCV 2021) with the four position slots per stage.

Each stage embeds the previous map with a strided convolution (patch size 4 for the stem, 2
after) followed by LayerNorm, then runs pre-norm blocks whose attention takes keys and values
from the grid reduced by an r x r strided convolution and LayerNorm (spatial-reduction
attention, SRA; r = 1 is plain attention). PVT's learned position table per stage is the
``absolute`` slot built per stage; with ``head='cls'`` a class token joins the last stage and
its table gets a row for it, as in PVT. CPVT (§4.6) removes the tables and puts a PEG after
the first block of every stage (``conditional='peg@0'``) with a GAP head.
"""

from __future__ import annotations

import torch
from torch import nn

from ..config import PVTConfig
from ..encodings.relative.base import RelativePosition
from ..grid import Grid, map_to_tokens, tokens_to_map
from ..padding import Padding
from ..registry import ARCHITECTURES
from .layers import Attention
from .pyramid import NormedPatchEmbed, PyramidTransformer

__all__ = ["SpatialReductionAttention", "PyramidVisionTransformer"]


class SpatialReductionAttention(Attention):
    """PVT's SRA: queries from every token, keys and values from the patch grid reduced by a
    ``sr_ratio`` x ``sr_ratio`` strided convolution and LayerNorm; prefix tokens stay keys as
    they are. Grid sides that are not multiples of the ratio lose their last rows and columns
    in the reduction, as in PVT.

    The query and key/value projections are the two parts of the inherited ``qkv`` layer
    (PVT's separate ``q`` and ``kv`` layers have the same parameters).
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        sr_ratio: int,
        qkv_bias: bool = True,
        attn_drop: float = 0.0,
        proj_drop: float = 0.0,
    ) -> None:
        super().__init__(dim, num_heads, qkv_bias, attn_drop, proj_drop)
        self.sr_ratio = sr_ratio
        self.sr = nn.Conv2d(dim, dim, kernel_size=sr_ratio, stride=sr_ratio)
        self.norm = nn.LayerNorm(dim)

    def key_value_source(self, x: torch.Tensor, grid: Grid, num_prefix_tokens: int) -> torch.Tensor:  # B, P + M, C
        """The prefix tokens and the reduced patch grid. With DETR's join the keys come from the
        reduced ``x + qk_pos``, the values from the reduced ``x``."""
        if min(grid) < self.sr_ratio:
            raise ValueError(
                f"spatial reduction by {self.sr_ratio} needs a grid of at least {self.sr_ratio}x{self.sr_ratio}, "
                f"got {grid[0]}x{grid[1]}; use a larger input or smaller sr_ratios"
            )
        patches = tokens_to_map(x[:, num_prefix_tokens:], grid)
        reduced = self.norm(map_to_tokens(self.sr(patches)))
        return torch.cat([x[:, :num_prefix_tokens], reduced], dim=1) if num_prefix_tokens else reduced

    def key_padding(self, padding: Padding, num_prefix_tokens: int) -> torch.Tensor:
        """The padded keys of :meth:`key_value_source`: a reduced cell is padding if all the cells it
        reduces are (exact where the valid grid is a multiple of the ratio, as for images whose
        sides are multiples of the stride)."""
        return padding.reduce((self.sr_ratio, self.sr_ratio)).tokens(num_prefix_tokens)

    def extra_repr(self) -> str:
        return f"sr_ratio={self.sr_ratio}"


@ARCHITECTURES.register("pvt")
class PyramidVisionTransformer(PyramidTransformer):
    """PVT: strided-convolution patch embeddings and spatial-reduction attention, slots per stage."""

    config_class = PVTConfig
    cfg: PVTConfig

    def make_downsample(self, stage: int) -> nn.Module:
        cfg = self.cfg
        if stage == 0:
            return NormedPatchEmbed(cfg.patch_size, cfg.in_chans, cfg.embed_dims[0])
        return NormedPatchEmbed(2, cfg.embed_dims[stage - 1], cfg.embed_dims[stage])

    def make_attention(self, stage: int, index: int, relative: RelativePosition | None) -> Attention | None:
        cfg = self.cfg
        ratio = cfg.sr_ratio(stage)
        if ratio == 1:  # plain attention; the config rejects relative encodings with a reduction
            return None
        dim, heads = cfg.embed_dims[stage], cfg.num_heads[stage]
        return SpatialReductionAttention(dim, heads, ratio, cfg.qkv_bias, cfg.attn_drop_rate, cfg.drop_rate)
