"""Box formats and overlaps: (cx, cy, w, h) <-> (x0, y0, x1, y1), IoU and generalised IoU.

Generalised IoU (Rezatofighi et al., CVPR 2019) as DETR uses it in its matching cost and loss:
GIoU = IoU - |C \\ (A u B)| / |C|, with C the smallest box enclosing A and B; it lies in (-1, 1].
"""

from __future__ import annotations

import torch

__all__ = ["box_cxcywh_to_xyxy", "box_xyxy_to_cxcywh", "box_area", "box_iou", "generalized_box_iou"]


def box_cxcywh_to_xyxy(boxes: torch.Tensor) -> torch.Tensor:  # ..., 4
    """Centre, width, height -> corners (x0, y0, x1, y1)."""
    cx, cy, w, h = boxes.unbind(-1)
    return torch.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], dim=-1)


def box_xyxy_to_cxcywh(boxes: torch.Tensor) -> torch.Tensor:  # ..., 4
    """Corners (x0, y0, x1, y1) -> centre, width, height."""
    x0, y0, x1, y1 = boxes.unbind(-1)
    return torch.stack([(x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0], dim=-1)


def box_area(boxes: torch.Tensor) -> torch.Tensor:  # ...
    """Area of corner boxes."""
    return (boxes[..., 2] - boxes[..., 0]) * (boxes[..., 3] - boxes[..., 1])


def box_iou(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # N, M each
    """Pairwise IoU of corner boxes a (N, 4) and b (M, 4), and the pairwise union areas."""
    area_a, area_b = box_area(a), box_area(b)
    top_left = torch.max(a[:, None, :2], b[None, :, :2])
    bottom_right = torch.min(a[:, None, 2:], b[None, :, 2:])
    inter = (bottom_right - top_left).clamp(min=0).prod(-1)
    union = area_a[:, None] + area_b[None, :] - inter
    return inter / union, union


def generalized_box_iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:  # N, M
    """Pairwise generalised IoU of corner boxes a (N, 4) and b (M, 4).

    Degenerate boxes (x1 < x0 or y1 < y0) raise: they give inf/nan, which a loss must not see.
    """
    for name, boxes in (("a", a), ("b", b)):
        if not bool((boxes[:, 2:] >= boxes[:, :2]).all()):
            raise ValueError(f"generalized_box_iou: boxes {name} have x1 < x0 or y1 < y0 (give corners x0, y0, x1, y1)")
    iou, union = box_iou(a, b)
    top_left = torch.min(a[:, None, :2], b[None, :, :2])
    bottom_right = torch.max(a[:, None, 2:], b[None, :, 2:])
    enclosing = (bottom_right - top_left).clamp(min=0).prod(-1)
    return iou - (enclosing - union) / enclosing
