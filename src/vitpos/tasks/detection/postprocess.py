"""DETR's predictions as scored boxes: every query's best real class, boxes in pixels."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .boxes import box_cxcywh_to_xyxy

__all__ = ["Detections", "postprocess"]


@dataclass(frozen=True)
class Detections:
    """One image's detections: scores (Q,), labels (Q,) and corner boxes in pixels (Q, 4)."""

    scores: torch.Tensor
    labels: torch.Tensor
    boxes: torch.Tensor


@torch.no_grad()
def postprocess(outputs: dict, image_hw: tuple[int, int]) -> list[Detections]:
    """DETR's ``PostProcess``: softmax over classes, the best class other than "no object" and its
    probability per query, boxes scaled from normalised (cx, cy, w, h) to (x0, y0, x1, y1) pixels."""
    prob = outputs["pred_logits"].float().softmax(-1)[..., :-1]
    scores, labels = prob.max(-1)
    h, w = image_hw
    scale = torch.tensor([w, h, w, h], dtype=torch.float32, device=prob.device)
    boxes = box_cxcywh_to_xyxy(outputs["pred_boxes"].float()) * scale
    return [Detections(s, c, b) for s, c, b in zip(scores, labels, boxes, strict=True)]
