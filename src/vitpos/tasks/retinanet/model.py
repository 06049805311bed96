"""RetinaNet (Lin et al., ICCV 2017) on a pyramid host: images (B, C, H, W) -> dense detections.

The host's last three stage maps (C3-C5) feed the P3-P7 pyramid (:mod:`.fpn_p3p7`), a class
and a box subnet shared by the levels (:mod:`.head`) score A = 9 anchors per cell
(:mod:`.anchors`); the loss is the focal loss plus box regression (:mod:`.criterion`), the
detections come from per-class NMS (:mod:`.inference`). Any input whose sides are multiples of
the host's stride works.
"""

from __future__ import annotations

import torch

from ...registry import ARCHITECTURES
from ..detection.postprocess import Detections
from ..pyramid_head import PyramidHeadModel
from .anchors import cell_anchors, grid_anchors
from .config import PYRAMID_LEVELS, RetinaNetConfig
from .criterion import RetinaNetLoss
from .fpn_p3p7 import RetinaFeaturePyramid
from .head import RetinaNetHead
from .inference import detect

__all__ = ["RetinaNet"]


@ARCHITECTURES.register("retinanet")
class RetinaNet(PyramidHeadModel):
    """RetinaNet on any PVT or Swin host, with any position slots.

    ``forward(images)`` returns a dict: ``pred_logits`` (B, N, K) class logits and ``pred_deltas``
    (B, N, 4) box deltas of all N anchors over P3-P7, the ``anchors`` (N, 4; corner pixels of the
    input), ``level_anchors`` (5,) anchors per level and the input's ``image_size`` (2,) as (H, W).
    """

    config_class = RetinaNetConfig
    cfg: RetinaNetConfig

    def __init__(self, cfg: RetinaNetConfig) -> None:
        super().__init__(cfg)
        in_dims = cfg.embed_dims[-PYRAMID_LEVELS:]
        self.neck = RetinaFeaturePyramid(
            (in_dims[0], in_dims[1], in_dims[2]), cfg.fpn_dim, cfg.p6_from, cfg.relu_before_p7
        )
        self.head = RetinaNetHead(cfg.fpn_dim, cfg.num_anchors, cfg.num_classes, cfg.head_convs)
        self.strides = cfg.level_strides()

    def anchors(self, grids: list[tuple[int, int]], device: torch.device) -> torch.Tensor:  # N, 4
        """Every level's anchors on its grid (H_l, W_l), in the order of the head's outputs."""
        cfg = self.cfg
        per_level = [
            grid_anchors(cell_anchors(cfg.anchor_scale * stride, cfg.anchor_scales, cfg.anchor_ratios), grid, stride)
            for grid, stride in zip(grids, self.strides, strict=True)
        ]
        return torch.cat(per_level).to(device=device, dtype=torch.float32)

    def forward(self, x: torch.Tensor) -> dict:
        levels = self.neck(self.backbone.forward_features(x)[-PYRAMID_LEVELS:])
        logits, deltas = self.head(levels)
        grids = [(level.shape[-2], level.shape[-1]) for level in levels]
        return {
            "pred_logits": logits,
            "pred_deltas": deltas,
            "anchors": self.anchors(grids, x.device),
            "level_anchors": torch.tensor([h * w * self.cfg.num_anchors for h, w in grids], device=x.device),
            "image_size": torch.tensor(x.shape[-2:], device=x.device),
        }

    def criterion(self) -> RetinaNetLoss:
        """Focal loss plus box regression with this model's settings."""
        return RetinaNetLoss(self.cfg)

    def postprocess(self, outputs: dict, image_hw: tuple[int, int]) -> list[Detections]:
        """Each image's detections (score threshold, top candidates per level, NMS), in pixels of ``image_hw``."""
        return detect(outputs, image_hw, self.cfg)
