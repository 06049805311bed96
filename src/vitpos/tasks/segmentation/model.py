"""A pyramid host with a Semantic FPN: images (B, C, H, W) -> per-pixel logits (B, K, H, W)."""

from __future__ import annotations

import torch

from ...registry import ARCHITECTURES
from ..pyramid_head import PyramidHeadModel
from .config import SemanticFPNConfig
from .fpn import FeaturePyramid, SemanticFPNHead

__all__ = ["SemanticFPN"]


@ARCHITECTURES.register("semantic_fpn")
class SemanticFPN(PyramidHeadModel):
    """Semantic FPN (Kirillov et al. 2019) on any PVT or Swin host, with any position slots.

    ``backbone`` is the host (its state-dict names under ``backbone.``); its per-stage maps
    (``forward_features``) feed ``neck`` (the FPN) and ``head``. Inputs of any size that is a
    multiple of the host's stride give logits of exactly the input size.
    """

    config_class = SemanticFPNConfig

    def __init__(self, cfg: SemanticFPNConfig) -> None:
        super().__init__(cfg)
        self.neck = FeaturePyramid(cfg.embed_dims, cfg.fpn_dim, cfg.conv_padding)
        self.head = SemanticFPNHead(
            cfg.num_stages, cfg.fpn_dim, cfg.head_dim, cfg.num_classes, cfg.norm_groups, cfg.head_dropout,
            cfg.conv_padding,
        )  # fmt: skip

    def forward(self, x: torch.Tensor, padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Images (B, C, H, W) and a padded batch's ``padding_mask`` (B, H, W) -> logits (B, K, H, W);
        the host honours the mask, the FPN's convolutions see the padded maps."""
        return self.head(self.neck(self.backbone.forward_features(x, padding_mask)), tuple(x.shape[-2:]))
