"""The config of a Semantic FPN segmenter: a pyramid host (PVT or Swin, any slot values) plus the
FPN neck and the semantic head of Kirillov et al. (CVPR 2019), as CPVT (§B.6, Table 13) uses it."""

from __future__ import annotations

from dataclasses import dataclass

from ...data.masks import IGNORE_INDEX
from ...errors import ConfigError
from ...validation import bounded
from ..pyramid_head import PyramidHeadConfig
from .fpn import CONV_PADDINGS

__all__ = ["SemanticFPNConfig", "IGNORE_INDEX"]


@dataclass
class SemanticFPNConfig(PyramidHeadConfig):
    """A pyramid host's fields (its ``num_classes`` is the segmentation classes) and the dense head's.

    The host is built from :attr:`backbone_config`: the same fields with ``arch=backbone`` and no
    classifier; its ``head``/``class_token`` only say whether a class token joins the last stage.
    """

    arch: str = bounded("semantic_fpn", choices=("semantic_fpn",))
    """Always 'semantic_fpn'; the host is :attr:`backbone`."""
    num_classes: int = bounded(150, ge=1)
    """Segmentation classes (ADE20K: 150), without the ignored label 255."""
    fpn_dim: int = bounded(256, ge=1)
    """Channels of the FPN neck's outputs (256 in FPN, Semantic FPN and CPVT's PVT setting)."""
    head_dim: int = bounded(128, ge=1)
    """Channels of the semantic head's upsampling stages (128 in Semantic FPN)."""
    norm_groups: int = bounded(32, ge=1)
    """GroupNorm groups in the head's stages (32, Kirillov et al.); must divide head_dim."""
    head_dropout: float = bounded(0.1, ge=0, lt=1)
    """Channel dropout before the classifier: 0.1 in the released PVT/CPVT configs (mmseg's FPNHead);
    the paper has none (set 0)."""
    conv_padding: str = bounded("zeros", choices=CONV_PADDINGS)
    """How the neck's and head's 3x3 convolutions pad: 'zeros' (the papers'), 'replicate' or 'circular'
    (no zero frame to read the border from)."""

    @property
    def task(self) -> str:
        """What the model predicts: ``segmentation`` (a class per pixel)."""
        return "segmentation"

    def _check_head(self) -> None:
        if self.head_dim % self.norm_groups:
            raise ConfigError(
                f"head_dim={self.head_dim} is not divisible by norm_groups={self.norm_groups}; "
                "choose a group count that divides head_dim"
            )
