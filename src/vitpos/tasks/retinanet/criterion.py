"""RetinaNet's loss (Lin et al. 2017, §4.1): focal loss over every non-ignored anchor and class, plus
box regression over the positive anchors, each summed and divided by the number of positives.

Targets are the detection task's padded rows (B, M, 5) of [class, cx, cy, w, h] normalised by
each image's size without its padding (:mod:`vitpos.data.objects`); they are scaled to the pixels
the anchors live on by the output's ``image_sizes``. A batch without any positive anchor divides by 1.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ...data.objects import unpad_objects
from ..detection.boxes import box_cxcywh_to_xyxy
from .assigner import IGNORED, assign_anchors
from .box_coding import encode_boxes
from .config import RetinaNetConfig
from .focal_loss import sigmoid_focal_loss

__all__ = ["RetinaNetLoss"]


class RetinaNetLoss(nn.Module):
    """The loss of a RetinaNet output dict against padded targets (B, M, 5); :meth:`components` gives the parts."""

    def __init__(self, cfg: RetinaNetConfig) -> None:
        super().__init__()
        self.cfg = cfg

    def _box_loss(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if self.cfg.box_loss == "l1":
            return F.l1_loss(pred, target, reduction="sum")
        return F.smooth_l1_loss(pred, target, beta=self.cfg.smooth_l1_beta, reduction="sum")

    def components(self, outputs: dict, targets: torch.Tensor) -> dict[str, torch.Tensor]:
        """``cls`` (focal) and ``box`` (smooth L1 or L1 of the deltas), both per positive anchor."""
        cfg = self.cfg
        logits, deltas = outputs["pred_logits"], outputs["pred_deltas"]
        anchors = outputs["anchors"].to(deltas)
        sizes = outputs["image_sizes"].to(deltas)
        cls_total, box_total, positives = logits.new_zeros(()), deltas.new_zeros(()), 0
        for b, objects in enumerate(unpad_objects(targets)):
            h, w = sizes[b]
            boxes = box_cxcywh_to_xyxy(objects.boxes.to(deltas)) * torch.stack([w, h, w, h])
            assigned = assign_anchors(anchors, boxes, cfg.positive_iou, cfg.negative_iou)
            positive = assigned >= 0
            counted = assigned != IGNORED
            onehot = torch.zeros_like(logits[b])
            onehot[positive, objects.labels.to(logits.device)[assigned[positive]]] = 1.0
            cls_total = cls_total + sigmoid_focal_loss(
                logits[b][counted], onehot[counted], cfg.focal_alpha, cfg.focal_gamma
            )
            if bool(positive.any()):
                wanted = encode_boxes(anchors[positive], boxes[assigned[positive]])
                box_total = box_total + self._box_loss(deltas[b][positive], wanted)
            positives += int(positive.sum())
        num = max(positives, 1)
        return {"cls": cls_total / num, "box": box_total / num}

    def forward(self, outputs: dict, targets: torch.Tensor) -> torch.Tensor:
        """The sum of the parts (both weighted 1, as the paper and PVT's configs)."""
        parts = self.components(outputs, targets)
        return parts["cls"] + parts["box"]
