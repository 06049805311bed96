"""The segmentation task as the engine sees it: per-pixel cross entropy and mIoU.

The loss is the mean cross entropy over labelled pixels (those not :data:`~.config.IGNORE_INDEX`),
as mmseg's ``CrossEntropyLoss`` with ``ignore_index=255``; the metrics are mIoU, aAcc and mAcc
from a confusion matrix summed over every batch and process (:mod:`.metrics`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ...data.dataset import DataInfo
from ...data.padded import PaddedTargets, plain_targets
from ..base import TaskKind, register_task
from .config import IGNORE_INDEX
from .metrics import SegmentationMetrics

__all__ = ["SegmentationTask", "segmentation_loss"]


def segmentation_loss(logits: torch.Tensor, masks: torch.Tensor, ignore_index: int = IGNORE_INDEX) -> torch.Tensor:
    """Mean cross entropy of logits (B, K, H, W) against masks (B, H, W) over the labelled pixels,
    in at least float32 (autocast outputs are upcast)."""
    if logits.shape[-2:] != masks.shape[-2:]:
        raise ValueError(f"logits of size {tuple(logits.shape[-2:])} against masks of size {tuple(masks.shape[-2:])}")
    logits = logits if logits.dtype == torch.float64 else logits.float()
    masks = masks.long()
    total = F.cross_entropy(logits, masks, ignore_index=ignore_index, reduction="sum")
    return total / (masks != ignore_index).sum().clamp(min=1)  # 0, not NaN, for a batch with no labelled pixel


class SegmentationTask:
    """Per-pixel cross entropy and mIoU for a segmenter's logits (B, K, H, W)."""

    name = "segmentation"

    def __init__(self, info: DataInfo, model: nn.Module | None = None) -> None:
        self.num_classes = info.num_outputs

    def loss(
        self, outputs: torch.Tensor, targets: torch.Tensor | PaddedTargets, label_smoothing: float = 0.0
    ) -> torch.Tensor:
        """Cross entropy over labelled pixels (padding is labelled ignore)."""
        if label_smoothing:
            raise ValueError("label_smoothing needs a classification task; segmentation uses hard per-pixel labels")
        return segmentation_loss(outputs, plain_targets(targets))

    def metrics(self, device: torch.device | str, image_hw: tuple[int, int] | None = None) -> SegmentationMetrics:
        return SegmentationMetrics(self.num_classes, device)


register_task(
    TaskKind(
        "segmentation",
        predicts="segmentation",
        noun="a segmenter",
        headline="miou",
        unit="mIoU, %",
        decimals=1,
        presets="a *_fpn preset (see `vitpos models --task segmentation`)",
        data="segmentation data (synthetic:segment, masks:PATH)",
        build=SegmentationTask,
        details=(("aacc", "aAcc, %"), ("macc", "mAcc, %")),
    )
)
