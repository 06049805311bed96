"""The segmentation loss: cross entropy over labelled pixels only."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from vitpos.data.dataset import DataInfo
from vitpos.tasks.segmentation.task import SegmentationTask, segmentation_loss


def test_loss_averages_over_labelled_pixels_only() -> None:
    logits = torch.randn(2, 3, 4, 5, dtype=torch.float64)
    masks = torch.randint(0, 3, (2, 4, 5))
    masks[0, :2] = 255
    keep = masks != 255
    per_pixel = -logits.log_softmax(1).gather(1, masks.clamp(max=2)[:, None])[:, 0]
    assert segmentation_loss(logits, masks).item() == pytest.approx(per_pixel[keep].mean().item())
    assert segmentation_loss(logits, torch.full_like(masks, 255)).item() == 0.0


def test_bf16_logits_are_upcast_and_sizes_checked() -> None:
    logits = torch.randn(1, 3, 4, 4).bfloat16()
    masks = torch.randint(0, 3, (1, 4, 4))
    assert segmentation_loss(logits, masks).dtype == torch.float32
    assert segmentation_loss(logits, masks).item() == pytest.approx(F.cross_entropy(logits.float(), masks).item())
    with pytest.raises(ValueError, match=r"logits of size \(4, 4\) against masks of size \(4, 5\)"):
        segmentation_loss(logits, torch.zeros(1, 4, 5, dtype=torch.long))


def test_task_refuses_label_smoothing() -> None:
    task = SegmentationTask(DataInfo("synthetic:segment", "segmentation", classes=("a", "b", "c")))
    with pytest.raises(ValueError, match="label_smoothing needs a classification task"):
        task.loss(torch.randn(1, 3, 2, 2), torch.zeros(1, 2, 2, dtype=torch.long), label_smoothing=0.1)
