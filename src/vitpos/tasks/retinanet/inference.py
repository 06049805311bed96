"""RetinaNet's detections (Lin et al. 2017, §4.1 "Inference"): per level the best-scoring
anchor-class pairs above a score threshold, decoded, then NMS per class over all levels and the
best ``max_detections`` kept; boxes are clipped to the image's valid region and scaled to the
size it is evaluated at (its original size, where a batch carries it)."""

from __future__ import annotations

import torch

from ..detection.postprocess import Detections
from .box_coding import decode_boxes
from .config import RetinaNetConfig
from .nms import batched_nms

__all__ = ["detect"]


def _level_candidates(
    logits: torch.Tensor, deltas: torch.Tensor, anchors: torch.Tensor, cfg: RetinaNetConfig
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One image's one level (N_l, K), (N_l, 4), (N_l, 4) -> scores, labels and corner boxes of its candidates."""
    scores = logits.sigmoid().flatten()
    above = (scores > cfg.score_threshold).nonzero().squeeze(1)
    top = scores[above].topk(min(cfg.candidates_per_level, len(above)))
    index = above[top.indices]
    anchor, label = index // logits.shape[1], index % logits.shape[1]
    return top.values, label, decode_boxes(anchors[anchor], deltas[anchor])


@torch.no_grad()
def detect(outputs: dict, sizes: tuple[int, int] | torch.Tensor, cfg: RetinaNetConfig) -> list[Detections]:
    """Every image's detections, boxes (x0, y0, x1, y1) in the pixels of an image of ``sizes``: one
    (H, W) for every image, or (B, 2) of each image's own."""
    logits, deltas = outputs["pred_logits"].float(), outputs["pred_deltas"].float()
    anchors = outputs["anchors"].float()
    counts = [int(n) for n in outputs["level_anchors"].tolist()]
    valid = outputs["image_sizes"].float()
    wanted = torch.as_tensor(sizes, dtype=torch.float32, device=valid.device).reshape(-1, 2).expand_as(valid)
    out = []
    for image_logits, image_deltas, (h, w), (to_h, to_w) in zip(logits, deltas, valid, wanted, strict=True):
        parts = [
            _level_candidates(*level, cfg)
            for level in zip(image_logits.split(counts), image_deltas.split(counts), anchors.split(counts), strict=True)
        ]
        scores, labels, boxes = (torch.cat(part) for part in zip(*parts, strict=True))
        boxes = torch.minimum(boxes.clamp(min=0), torch.stack([w, h, w, h]))
        keep = batched_nms(boxes, scores, labels, cfg.nms_iou)[: cfg.max_detections]
        scale = torch.stack([to_w / w, to_h / h, to_w / w, to_h / h])
        out.append(Detections(scores[keep], labels[keep], boxes[keep] * scale))
    return out
