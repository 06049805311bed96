"""The CeiT host (Yuan et al., ICCV 2021): I2T stem, LeFF blocks and layer-wise class-token attention, every slot.

One stage, as the plain ViT, with ``downsamples.0`` the I2T stem, blocks whose feed-forward is
LeFF (``mlp``), and after the stage the LCA layer (``lca``) over the class tokens every block
gave, each with its learned layer embedding (``pos_layer_embed``). LCA's output takes the class
token's place before the final norm, so :meth:`forward_tokens` and the head read it as the class
token. The slots go where they go in the ViT (LaPE joins the blocks' attention input).
"""

from __future__ import annotations

import torch
from torch import nn

from ..config import CeiTConfig
from ..encodings.relative.base import RelativePosition
from ..grid import Grid
from ..padding import Padding
from ..registry import ARCHITECTURES
from .ceit_layers import ImageToTokens, LayerClassAttention, LocallyEnhancedFeedForward
from .layers import Block
from .vit import VisionTransformer

__all__ = ["CeiTBlock", "CeiT"]


class CeiTBlock(Block):
    """A ViT block whose feed-forward is LeFF on the token map."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float = 4.0, leff_kernel: int = 3, **options) -> None:
        super().__init__(dim, num_heads, mlp_ratio, **options)
        self.mlp = LocallyEnhancedFeedForward(dim, int(dim * mlp_ratio), leff_kernel)

    def feed_forward(self, h: torch.Tensor, grid: Grid, num_prefix_tokens: int) -> torch.Tensor:
        """LeFF of the normalised tokens on the ``grid``'s token map (the prefix tokens pass through)."""
        return self.mlp(h, grid, num_prefix_tokens)


@ARCHITECTURES.register("ceit")
class CeiT(VisionTransformer):
    """CeiT: the ViT host with the I2T stem, LeFF blocks and LCA."""

    config_class = CeiTConfig
    cfg: CeiTConfig
    takes_padding = False

    def __init__(self, cfg: CeiTConfig) -> None:
        super().__init__(cfg)
        self.lca = LayerClassAttention(cfg.embed_dim, cfg.num_heads, cfg.mlp_ratio, cfg.qkv_bias, self.norm_eps)
        self.pos_layer_embed = nn.Parameter(torch.zeros(1, cfg.depth, cfg.embed_dim))

    def make_downsample(self, stage: int) -> nn.Module:
        cfg = self.cfg
        return ImageToTokens(cfg.in_chans, cfg.stem_channels, cfg.patch_size, cfg.embed_dim)

    def make_block(self, stage: int, index: int, relative: RelativePosition | None) -> Block:
        cfg = self.cfg
        return CeiTBlock(
            cfg.embed_dim, cfg.num_heads, cfg.mlp_ratio, cfg.leff_kernel, qkv_bias=cfg.qkv_bias, drop=cfg.drop_rate,
            attn_drop=cfg.attn_drop_rate, drop_path=self.drop_path_rates[stage][index], relative=relative,
            norm_eps=self.norm_eps, layer_scale=cfg.layer_scale,
        )  # fmt: skip

    def forward_stages(
        self, x: torch.Tensor, padding_mask: torch.Tensor | None = None
    ) -> tuple[list[torch.Tensor], torch.Tensor, Grid, Padding | None]:
        """Images -> ([], the normalised tokens with LCA's output as the class token, the grid, None)."""
        self.check_padding(padding_mask)
        tokens, grid = self.downsamples[0](x)  # the stem checks the images
        stage = self.stages[0]
        taps: list[torch.Tensor] = []
        tokens = stage(self._prepend_prefix(tokens), grid, stage.num_prefix_tokens, taps=taps)
        layers = torch.stack([t[:, 0] for t in taps], dim=1) + self.pos_layer_embed  # B, L, C
        return [], self.norm(torch.cat([self.lca(layers), tokens[:, 1:]], dim=1)), grid, None
