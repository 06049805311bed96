"""Which object each anchor learns (RetinaNet, Lin et al. 2017, §4): by IoU with the objects.

An anchor whose best IoU with an object is at least 0.5 is positive for that object, below 0.4
negative (background), in between ignored by the loss. As in mmdet's ``MaxIoUAssigner`` and
Detectron2's RetinaNet (``allow_low_quality_matches``), every object also claims the anchors that
overlap it most (all of them on a tie), even below 0.5, so no object goes without a positive.
"""

from __future__ import annotations

import torch

from ..detection.boxes import box_iou

__all__ = ["assign_anchors", "BACKGROUND", "IGNORED"]

BACKGROUND = -1
"""The assignment of a negative anchor."""
IGNORED = -2
"""The assignment of an anchor the loss leaves out."""


def assign_anchors(
    anchors: torch.Tensor, boxes: torch.Tensor, positive_iou: float = 0.5, negative_iou: float = 0.4
) -> torch.Tensor:  # N
    """Per anchor (N, 4), the index of its object in ``boxes`` (M, 4; corners), or BACKGROUND / IGNORED."""
    assigned = torch.full((len(anchors),), BACKGROUND, dtype=torch.int64, device=anchors.device)
    if len(boxes) == 0:
        return assigned
    iou, _ = box_iou(anchors, boxes.to(anchors))  # N, M
    best_iou, best = iou.max(dim=1)
    assigned[best_iou >= negative_iou] = IGNORED
    assigned[best_iou >= positive_iou] = best[best_iou >= positive_iou]
    per_object = iou.max(dim=0).values  # M
    closest = (iou == per_object[None]) & (per_object[None] > 0)  # N, M
    last = len(boxes) - 1 - closest.flip(1).int().argmax(dim=1)  # ties: the last object wins, as mmdet's loop
    claimed = closest.any(dim=1)
    assigned[claimed] = last[claimed]
    return assigned
