"""Non-maximum suppression in plain torch: greedy NMS and its per-class form (torchvision's semantics).

Greedy NMS keeps the highest-scoring box, drops every box overlapping it by more than the
threshold, and repeats on what is left. Here that greedy pass is computed without a Python loop
over boxes: with the boxes sorted by score and ``over[i, j]`` true when an earlier box i overlaps
a later box j too much, box j is kept exactly when no *kept* earlier box overlaps it, a
triangular system solved by fixed-point iteration (each sweep fixes at least one more box, and
it usually settles in a few sweeps).
"""

from __future__ import annotations

import torch

from ..detection.boxes import box_iou

__all__ = ["nms", "batched_nms"]


def nms(boxes: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    """Indices of the boxes (N, 4; corners) that greedy NMS keeps, by decreasing score."""
    if boxes.ndim != 2 or boxes.shape[-1] != 4 or scores.shape != boxes.shape[:1]:
        raise ValueError(f"nms takes boxes (N, 4) and scores (N,), got {tuple(boxes.shape)} and {tuple(scores.shape)}")
    order = scores.argsort(descending=True, stable=True)
    sorted_boxes = boxes[order].float()
    iou, _ = box_iou(sorted_boxes, sorted_boxes)
    over = torch.triu(iou > iou_threshold, diagonal=1)  # over[i, j]: i ranks above j and suppresses it
    keep = torch.ones(len(order), dtype=torch.bool, device=boxes.device)
    for _ in range(len(order)):
        settled = ~(over & keep[:, None]).any(0)
        if torch.equal(settled, keep):
            break
        keep = settled
    return order[keep]


def batched_nms(boxes: torch.Tensor, scores: torch.Tensor, labels: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    """NMS within each label: boxes of different labels never suppress each other (indices by decreasing score)."""
    if len(boxes) == 0:
        return torch.zeros(0, dtype=torch.int64, device=boxes.device)
    span = (boxes.max() - boxes.min()).float() + 1  # shift each label's boxes beyond every other's
    shifted = boxes.float() + (labels.float() * span)[:, None]
    return nms(shifted, scores, iou_threshold)
