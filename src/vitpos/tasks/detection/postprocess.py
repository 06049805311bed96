"""DETR's predictions as scored boxes: every query's best real class, boxes in each image's own pixels."""

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
def postprocess(outputs: dict, sizes: tuple[int, int] | torch.Tensor) -> list[Detections]:
    """DETR's ``PostProcess``: softmax over classes, the best class other than "no object" and its
    probability per query, boxes scaled from normalised (cx, cy, w, h) to (x0, y0, x1, y1) pixels.

    ``sizes``: one (H, W) for every image, or (B, 2) of each image's own (DETR's
    ``orig_target_sizes``: the boxes are relative to each image's unpadded region, so they come
    out in that image's original pixels)."""
    prob = outputs["pred_logits"].float().softmax(-1)[..., :-1]
    scores, labels = prob.max(-1)
    hw = torch.as_tensor(sizes, dtype=torch.float32, device=prob.device).reshape(-1, 2)
    scale = torch.stack([hw[:, 1], hw[:, 0], hw[:, 1], hw[:, 0]], dim=-1)[:, None]  # B or 1, 1, 4
    boxes = box_cxcywh_to_xyxy(outputs["pred_boxes"].float()) * scale
    return [Detections(s, c, b) for s, c, b in zip(scores, labels, boxes, strict=True)]
