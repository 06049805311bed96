"""The Compact Transformers host (Hassani et al. 2021): ViT-Lite, CVT and CCT with the four slots.

One stage, as the plain ViT, with the authors' encoder layer (:class:`CompactBlock`), LayerNorm
epsilon 1e-5, a patch or convolutional tokenizer (``downsamples.0``) and any head, sequence
pooling included (:class:`~.seq_pool.SequencePool`, ``attention_pool``). Every slot goes where
it goes in the ViT: the join's per-block addition (LaPE) joins the normalised attention input.
"""

from __future__ import annotations

from torch import nn

from ..config import CompactConfig
from ..registry import ARCHITECTURES
from .layers import Block, PatchEmbed
from .tokenizers import ConvTokenizer
from .vit import VisionTransformer

__all__ = ["CompactBlock", "CompactTransformer"]


class CompactBlock(Block):
    """The authors' encoder layer: ``x = norm2(x + attn(norm1(x) + pos))``, then ``x + mlp(x)``.

    The second norm sits on the residual stream, not only on the MLP input as in the pre-norm
    ViT block; the parameters (names and shapes) are the ViT block's.
    """

    norm_on_residual = True


@ARCHITECTURES.register("compact")
class CompactTransformer(VisionTransformer):
    """ViT-Lite / CVT / CCT: the ViT host with the authors' tokenizers, blocks and sequence pooling."""

    config_class = CompactConfig
    cfg: CompactConfig
    norm_eps = 1e-5
    block_class = CompactBlock

    @property
    def takes_padding(self) -> bool:  # type: ignore[override]
        """The patch tokenizer cuts patches apart; the convolutional one mixes them."""
        return self.cfg.tokenizer == "patch"

    def make_downsample(self, stage: int) -> nn.Module:
        cfg = self.cfg
        if cfg.tokenizer == "patch":
            return PatchEmbed(cfg.patch_size, cfg.in_chans, cfg.embed_dim, pad=cfg.pad_to_patch)
        return ConvTokenizer(
            cfg.in_chans, cfg.embed_dim, cfg.conv_layers, cfg.conv_kernel, cfg.conv_stride, cfg.conv_padding,
            cfg.conv_channels,
        )  # fmt: skip
