"""The T2T-ViT host (Yuan et al., ICCV 2021): the tokens-to-token stem and a ViT backbone, with every slot.

One stage, as the plain ViT: ``downsamples.0`` is the stem (:class:`~.t2t_stem.TokensToToken`),
the blocks are the ViT's (LayerNorm epsilon 1e-5, no query/key/value biases, the logit scale
``qk_scale`` where the config sets one), and the slots go where they go in the ViT: T2T-ViT's
own encoding is ``absolute='sincos1d'``, LaPE joins the normalised attention input.
"""

from __future__ import annotations

from torch import nn

from ..config import T2TConfig
from ..encodings.relative.base import RelativePosition
from ..registry import ARCHITECTURES
from .layers import Block
from .t2t_stem import TokensToToken
from .vit import VisionTransformer

__all__ = ["T2TViT"]


@ARCHITECTURES.register("t2t")
class T2TViT(VisionTransformer):
    """T2T-ViT: the ViT host with the tokens-to-token stem."""

    config_class = T2TConfig
    cfg: T2TConfig
    norm_eps = 1e-5
    takes_padding = False

    def make_downsample(self, stage: int) -> nn.Module:
        cfg = self.cfg
        return TokensToToken(cfg.in_chans, cfg.embed_dim, cfg.token_dim, cfg.t2t_layer)

    def make_block(self, stage: int, index: int, relative: RelativePosition | None) -> Block:
        block = super().make_block(stage, index, relative)
        if self.cfg.qk_scale is not None:
            block.attn.scale = self.cfg.qk_scale
        return block
