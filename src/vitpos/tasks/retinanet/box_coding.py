"""The standard box coding of R-CNN, Faster R-CNN and RetinaNet: a box relative to its anchor.

For an anchor of centre (xa, ya) and size (wa, ha) and a box (x, y, w, h), the deltas are
((x - xa) / wa, (y - ya) / ha, log(w / wa), log(h / ha)), each divided by its standard deviation
(RetinaNet: 1, 1, 1, 1). Decoding clamps the log-size deltas at log(1000 / 16) so a wild
prediction cannot overflow (mmdet's and Detectron2's bound).
"""

from __future__ import annotations

import math

import torch

from ..detection.boxes import box_cxcywh_to_xyxy, box_xyxy_to_cxcywh

__all__ = ["encode_boxes", "decode_boxes", "MAX_LOG_SCALE"]

MAX_LOG_SCALE = math.log(1000.0 / 16)
"""The largest log-size delta decoding uses."""


def encode_boxes(
    anchors: torch.Tensor, boxes: torch.Tensor, stds: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0)
) -> torch.Tensor:  # N, 4
    """Deltas (N, 4) that take corner ``anchors`` (N, 4) to corner ``boxes`` (N, 4)."""
    xa, ya, wa, ha = box_xyxy_to_cxcywh(anchors).unbind(-1)
    x, y, w, h = box_xyxy_to_cxcywh(boxes).unbind(-1)
    deltas = torch.stack([(x - xa) / wa, (y - ya) / ha, torch.log(w / wa), torch.log(h / ha)], dim=-1)
    return deltas / deltas.new_tensor(stds)


def decode_boxes(
    anchors: torch.Tensor, deltas: torch.Tensor, stds: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0)
) -> torch.Tensor:  # N, 4
    """Corner boxes (N, 4) from ``deltas`` (N, 4) on corner ``anchors`` (N, 4); the inverse of :func:`encode_boxes`."""
    dx, dy, dw, dh = (deltas * deltas.new_tensor(stds)).unbind(-1)
    xa, ya, wa, ha = box_xyxy_to_cxcywh(anchors.to(deltas)).unbind(-1)
    dw, dh = dw.clamp(max=MAX_LOG_SCALE), dh.clamp(max=MAX_LOG_SCALE)
    centre_size = torch.stack([xa + dx * wa, ya + dy * ha, wa * dw.exp(), ha * dh.exp()], dim=-1)
    return box_cxcywh_to_xyxy(centre_size)
