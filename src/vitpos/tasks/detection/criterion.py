"""DETR's set loss (Carion et al. 2020, §3.1 and its code ``SetCriterion``).

After Hungarian matching: cross entropy over C + 1 classes for every query (unmatched queries
learn "no object", down-weighted by ``eos_coef``), and for matched queries the L1 distance of
normalised (cx, cy, w, h) boxes and 1 - GIoU, both summed and divided by the number of objects
in the batch (averaged over processes under data parallelism). With auxiliary decoding losses
the same loss, with its own matching, is added for the output of every decoder layer.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ...data.objects import ObjectTargets, unpad_objects
from .boxes import box_cxcywh_to_xyxy, generalized_box_iou
from .matching import HungarianMatcher

__all__ = ["LossWeights", "SetCriterion"]


@dataclass(frozen=True)
class LossWeights:
    """DETR's defaults: class 1, L1 5, GIoU 2 (the same weights as its matching costs), no-object 0.1."""

    ce: float = 1.0
    bbox: float = 5.0
    giou: float = 2.0
    eos_coef: float = 0.1


def _num_objects(targets: list[ObjectTargets], device: torch.device) -> float:
    """Objects in the batch, averaged over processes (DETR's ``num_boxes``), at least 1."""
    count = torch.tensor([float(sum(len(t.labels) for t in targets))], device=device)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.all_reduce(count)
        count /= torch.distributed.get_world_size()
    return max(count.item(), 1.0)


class SetCriterion(nn.Module):
    """The loss of a DETR output dict against padded targets (B, M, 5); :meth:`components` gives the parts."""

    class_weight: torch.Tensor

    def __init__(self, num_classes: int, weights: LossWeights = LossWeights()) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.weights = weights
        self.matcher = HungarianMatcher(weights.ce, weights.bbox, weights.giou)
        class_weight = torch.ones(num_classes + 1)
        class_weight[-1] = weights.eos_coef
        self.register_buffer("class_weight", class_weight, persistent=False)

    def layer_losses(
        self, logits: torch.Tensor, boxes: torch.Tensor, targets: list[ObjectTargets], num: float
    ) -> dict[str, torch.Tensor]:
        """ce, bbox and giou of one decoder layer's predictions."""
        logits, boxes = logits.float(), boxes.float()
        matches = self.matcher(logits, boxes, targets)
        batch = torch.cat([torch.full_like(q, b) for b, (q, _) in enumerate(matches)]).to(logits.device)
        query = torch.cat([q for q, _ in matches]).to(logits.device)
        classes = torch.full(logits.shape[:2], self.num_classes, dtype=torch.int64, device=logits.device)
        classes[batch, query] = torch.cat(
            [t.labels[o.to(t.labels.device)] for t, (_, o) in zip(targets, matches, strict=True)]
        ).to(logits.device)
        ce = F.cross_entropy(logits.transpose(1, 2), classes, weight=self.class_weight.to(logits.device))
        pred = boxes[batch, query]
        true = torch.cat([t.boxes[o.to(t.boxes.device)] for t, (_, o) in zip(targets, matches, strict=True)]).to(pred)
        bbox = F.l1_loss(pred, true, reduction="sum") / num
        giou = (
            pred.new_zeros(())
            if len(pred) == 0
            else (1 - torch.diag(generalized_box_iou(box_cxcywh_to_xyxy(pred), box_cxcywh_to_xyxy(true)))).sum() / num
        )
        return {"ce": ce, "bbox": bbox, "giou": giou}

    def components(self, outputs: dict, targets: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every loss part by name: ``ce``, ``bbox``, ``giou`` of the last layer, ``aux{i}_*`` of the others."""
        objects = unpad_objects(targets)
        num = _num_objects(objects, targets.device)
        parts = self.layer_losses(outputs["pred_logits"], outputs["pred_boxes"], objects, num)
        for i, aux in enumerate(outputs.get("aux_outputs", ())):
            layer = self.layer_losses(aux["pred_logits"], aux["pred_boxes"], objects, num)
            parts |= {f"aux{i}_{k}": v for k, v in layer.items()}
        return parts

    def forward(self, outputs: dict, targets: torch.Tensor) -> torch.Tensor:
        """The weighted sum of every part."""
        w = self.weights
        weight = {"ce": w.ce, "bbox": w.bbox, "giou": w.giou}
        terms = (weight[name.rpartition("_")[2]] * value for name, value in self.components(outputs, targets).items())
        return functools.reduce(operator.add, terms)
