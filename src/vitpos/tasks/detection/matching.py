"""DETR's Hungarian matcher: a one-to-one assignment of predictions to objects per image.

The cost of prediction i for object j is (DETR, Carion et al. 2020, §3.1 and its code)
``w_class * -p_i(c_j) + w_bbox * ||b_i - b_j||_1 + w_giou * -GIoU(b_i, b_j)``, with the class
probability (not its log), boxes as normalised (cx, cy, w, h) for L1 and as corners for GIoU.
``scipy.optimize.linear_sum_assignment`` minimises the total cost.
"""

from __future__ import annotations

import torch
from scipy.optimize import linear_sum_assignment  # type: ignore[import-untyped]  # scipy ships no stubs here
from torch import nn

from ...data.objects import ObjectTargets
from .boxes import box_cxcywh_to_xyxy, generalized_box_iou

__all__ = ["HungarianMatcher", "assign"]


def assign(cost: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows and columns of the minimum-cost one-to-one assignment of a (N, M) cost matrix."""
    if not bool(torch.isfinite(cost).all()):
        raise ValueError("the matching cost has inf or nan entries (degenerate boxes or a diverged model)")
    rows, cols = linear_sum_assignment(cost.detach().cpu().double().numpy())
    return torch.as_tensor(rows, dtype=torch.int64), torch.as_tensor(cols, dtype=torch.int64)


class HungarianMatcher(nn.Module):
    """Match the predictions of each image to its objects; weights as DETR's defaults (1, 5, 2)."""

    def __init__(self, cost_class: float = 1.0, cost_bbox: float = 5.0, cost_giou: float = 2.0) -> None:
        super().__init__()
        if cost_class == cost_bbox == cost_giou == 0:
            raise ValueError("all matching costs are 0; give at least one of cost_class, cost_bbox, cost_giou a weight")
        self.cost_class, self.cost_bbox, self.cost_giou = cost_class, cost_bbox, cost_giou

    def costs(self, logits: torch.Tensor, boxes: torch.Tensor, target: ObjectTargets) -> torch.Tensor:  # Q, n
        """The (queries, objects) cost matrix of one image."""
        prob = logits.float().softmax(-1)[:, target.labels]
        pred, true = boxes.float(), target.boxes.float()
        l1 = torch.cdist(pred, true, p=1)
        giou = generalized_box_iou(box_cxcywh_to_xyxy(pred), box_cxcywh_to_xyxy(true))
        return self.cost_class * -prob + self.cost_bbox * l1 + self.cost_giou * -giou

    @torch.no_grad()
    def forward(
        self, logits: torch.Tensor, boxes: torch.Tensor, targets: list[ObjectTargets]
    ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """``logits`` (B, Q, C + 1), ``boxes`` (B, Q, 4) -> per image (query indices, object indices)."""
        out = []
        for b, target in enumerate(targets):
            if len(target.labels) == 0:
                empty = torch.empty(0, dtype=torch.int64)
                out.append((empty, empty))
                continue
            out.append(assign(self.costs(logits[b], boxes[b], target)))
        return out
