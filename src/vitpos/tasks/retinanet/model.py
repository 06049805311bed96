"""RetinaNet (Lin et al., ICCV 2017) on a pyramid host: images (B, C, H, W) -> dense detections.

The host's last three stage maps (C3-C5) feed the P3-P7 pyramid (:mod:`.fpn_p3p7`), a class
and a box subnet shared by the levels (:mod:`.head`) score A = 9 anchors per cell
(:mod:`.anchors`); the loss is the focal loss plus box regression (:mod:`.criterion`), the
detections come from per-class NMS (:mod:`.inference`). Any input whose sides are multiples of
the host's stride works.

A padded batch (``padding_mask`` (B, H, W), True on padding, images at the top left) runs the
host on each image's valid region (:mod:`vitpos.padding`); the pyramid and the heads then run on
the padded maps as in mmdet (their convolutions see the host's zeroed padded cells, plus the
laterals' biases there), anchors cover the padded grid, and each image's boxes are read in its
own valid pixels (``image_sizes``).
"""

from __future__ import annotations

import torch

from ...padding import Padding
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
    input), ``level_anchors`` (5,) anchors per level and ``image_sizes`` (B, 2): each image's (H, W)
    in the input, without its padding.
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

    def forward(self, x: torch.Tensor, padding_mask: torch.Tensor | None = None) -> dict:
        levels = self.neck(self.backbone.forward_features(x, padding_mask)[-PYRAMID_LEVELS:])
        logits, deltas = self.head(levels)
        grids = [(level.shape[-2], level.shape[-1]) for level in levels]
        if padding_mask is None:
            sizes = torch.tensor(x.shape[-2:], device=x.device).expand(x.shape[0], 2)
        else:
            sizes = Padding.from_mask(padding_mask.to(x.device), x.shape[0]).valid
        return {
            "pred_logits": logits,
            "pred_deltas": deltas,
            "anchors": self.anchors(grids, x.device),
            "level_anchors": torch.tensor([h * w * self.cfg.num_anchors for h, w in grids], device=x.device),
            "image_sizes": sizes,
        }

    def criterion(self) -> RetinaNetLoss:
        """Focal loss plus box regression with this model's settings."""
        return RetinaNetLoss(self.cfg)

    def postprocess(self, outputs: dict, sizes: tuple[int, int] | torch.Tensor) -> list[Detections]:
        """Each image's detections (score threshold, top candidates per level, NMS), in the pixels of an
        image of ``sizes``: one (H, W) for all, or (B, 2), each image's own (e.g. its original size)."""
        return detect(outputs, sizes, self.cfg)
