"""The plain Vision Transformer host (ViT, DeiT, CPVT, ViT-Lite): a pyramid of one stage.

Its one downsampling step is the patch embedding; no downsampling follows the stage. Class
and register tokens, the four slots, the blocks, the final norm and the head are the
pyramid's (:class:`~.pyramid.PyramidTransformer`), so its parameters are named
``downsamples.0.proj``, ``cls_token``, ``reg_token``, ``stages.0.{absolute, join,
conditional, blocks.N}``, ``norm`` and ``head``. Checkpoints written with the earlier names
(``patch_embed.proj``, ``absolute``, ``blocks.N``, ...) are renamed on load by
:func:`upgrade_state_dict`.
"""

from __future__ import annotations

from typing import TypeVar

from torch import nn

from ..config import ViTConfig
from ..registry import ARCHITECTURES
from .layers import PatchEmbed
from .pyramid import PyramidTransformer

__all__ = ["VisionTransformer", "upgrade_state_dict", "LEGACY_NAMES"]

LEGACY_NAMES = {
    "patch_embed.": "downsamples.0.",
    "absolute.": "stages.0.absolute.",
    "join.": "stages.0.join.",
    "conditional.": "stages.0.conditional.",
    "blocks.": "stages.0.blocks.",
}
"""Earlier ViT parameter-name prefixes and the pyramid names they became."""

_Value = TypeVar("_Value")


def upgrade_state_dict(state: dict[str, _Value]) -> dict[str, _Value]:
    """``state`` with the ViT's earlier parameter names renamed to the pyramid's (:data:`LEGACY_NAMES`).

    Names that are already current (every pyramid host's, and the ViT's own now) pass unchanged,
    so any vitpos state dict may go through it.
    """
    upgraded = {}
    for key, value in state.items():
        old = next((prefix for prefix in LEGACY_NAMES if key.startswith(prefix)), None)
        upgraded[key if old is None else LEGACY_NAMES[old] + key[len(old) :]] = value
    return upgraded


@ARCHITECTURES.register("vit")
class VisionTransformer(PyramidTransformer):
    """ViT with an absolute encoding, a join, conditional generators and relative attention terms.

    The grid (H, W) is computed from every input, so the model runs at any image size that is
    a multiple of the patch size (or any size with ``pad_to_patch``). As in timm,
    :meth:`forward_tokens` gives the normalised tokens (B, P + H*W, D) and :meth:`forward_head`
    pools them; :meth:`forward_features` returns a list with one map (B, D, H, W) of the patch
    tokens, as every host does.
    """

    config_class = ViTConfig
    cfg: ViTConfig

    def make_downsample(self, stage: int) -> nn.Module:
        cfg = self.cfg
        return PatchEmbed(cfg.patch_size, cfg.in_chans, cfg.embed_dim, pad=cfg.pad_to_patch)
