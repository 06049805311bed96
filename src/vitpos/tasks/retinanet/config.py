"""The config of a RetinaNet detector on a pyramid host (CPVT §B.6, Table 13: "RetinaNet on COCO").

The host's fields (PVT or Swin, any slot values; ``num_classes`` is the object classes) plus the
feature pyramid, anchors, loss and inference settings of RetinaNet (Lin et al., ICCV 2017),
whose values are the paper's and PVT's released RetinaNet configs' (mmdet) where they agree; the
two differ only in ``relu_before_p7`` and ``box_loss`` (see each field).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import ConfigError
from ...validation import bounded
from ..pyramid_head import PyramidHeadConfig
from .anchors import RETINANET_RATIOS, RETINANET_SCALES
from .fpn_p3p7 import P6_SOURCES

__all__ = ["RetinaNetConfig", "BOX_LOSSES"]

BOX_LOSSES = ("smooth_l1", "l1")
"""Box regression losses: the paper's smooth L1 and PVT's (mmdet 2's) L1."""
PYRAMID_LEVELS = 3
"""Backbone stages the FPN reads: the last three (C3-C5); P6 and P7 are computed from them."""


@dataclass
class RetinaNetConfig(PyramidHeadConfig):
    """A pyramid host's fields and RetinaNet's: FPN width, anchors, focal loss, box loss, inference."""

    arch: str = bounded("retinanet", choices=("retinanet",))
    """Always 'retinanet'; the host is :attr:`backbone`."""
    num_classes: int = bounded(80, ge=1)
    """Object classes (COCO: 80); no background class (each class is a sigmoid)."""
    fpn_dim: int = bounded(256, ge=1)
    """Channels of P3-P7 and of the heads' convolutions (256)."""
    head_convs: int = bounded(4, ge=0)
    """3x3 convolutions (with ReLU) in each subnet before its output convolution (4)."""
    p6_from: str = bounded("c5", choices=P6_SOURCES)
    """P6 from C5 (the paper, PVT) or from P5."""
    relu_before_p7: bool = True
    """ReLU between P6 and P7: the paper's; PVT's released configs (mmdet) have none (False)."""
    anchor_scale: float = bounded(4.0, gt=0)
    """Anchor base size in strides: 4 (32 pixels on P3)."""
    anchor_scales: tuple[float, ...] = bounded(RETINANET_SCALES, gt=0)
    """Octave scales of the base size (2^0, 2^(1/3), 2^(2/3))."""
    anchor_ratios: tuple[float, ...] = bounded(RETINANET_RATIOS, gt=0)
    """Anchor height / width ratios (0.5, 1, 2)."""
    positive_iou: float = bounded(0.5, gt=0, le=1)
    """IoU with an object from which an anchor is positive (0.5)."""
    negative_iou: float = bounded(0.4, ge=0, le=1)
    """IoU below which an anchor is background (0.4); in between it is ignored."""
    focal_alpha: float = bounded(0.25, ge=0, le=1)
    """The focal loss's alpha (0.25)."""
    focal_gamma: float = bounded(2.0, ge=0)
    """The focal loss's gamma (2)."""
    box_loss: str = bounded("smooth_l1", choices=BOX_LOSSES)
    """'smooth_l1' (the paper; beta = ``smooth_l1_beta``) or 'l1' (PVT's released configs, mmdet 2)."""
    smooth_l1_beta: float = bounded(0.11, gt=0)
    """Where smooth L1 turns from quadratic to linear (0.11, Detectron's RetinaNet)."""
    score_threshold: float = bounded(0.05, ge=0, lt=1)
    """Inference: class scores below this are dropped (0.05)."""
    candidates_per_level: int = bounded(1000, ge=1)
    """Inference: the best-scoring anchor-class pairs kept per level before NMS (1000)."""
    nms_iou: float = bounded(0.5, gt=0, le=1)
    """Inference: NMS IoU threshold, per class (0.5)."""
    max_detections: int = bounded(100, ge=1)
    """Inference: detections kept per image after NMS (100)."""

    @property
    def task(self) -> str:
        """What the model predicts: ``detection``."""
        return "detection"

    @property
    def num_anchors(self) -> int:
        """Anchors per cell: scales x ratios (9)."""
        return len(self.anchor_scales) * len(self.anchor_ratios)

    def level_strides(self) -> tuple[int, ...]:
        """The strides of P3-P7 in pixels: those of the last three stages, then two halvings."""
        c5 = self.patch_size * 2 ** (len(self.depths) - 1)
        return (c5 // 4, c5 // 2, c5, c5 * 2, c5 * 4)

    def _check_head(self) -> None:
        if len(self.depths) < PYRAMID_LEVELS:
            raise ConfigError(
                f"RetinaNet reads the last {PYRAMID_LEVELS} stages of its host, which has {len(self.depths)}; "
                f"give a host of at least {PYRAMID_LEVELS} stages"
            )
        if self.negative_iou > self.positive_iou:
            raise ConfigError(
                f"negative_iou={self.negative_iou} is above positive_iou={self.positive_iou}; "
                "an anchor cannot be both: keep negative_iou <= positive_iou"
            )
