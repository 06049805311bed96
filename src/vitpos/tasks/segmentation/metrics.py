"""Segmentation metrics from a confusion matrix, summed exactly over batches and processes.

``matrix[t, p]`` counts the pixels of true class t predicted as p; pixels labelled
:data:`~.config.IGNORE_INDEX` are left out. IoU of class c is TP / (TP + FP + FN); mIoU is the
mean over the classes present in the labels or the predictions (a class absent from both has no
IoU and is skipped, as mmseg's ``nanmean``). Also pixel accuracy (aAcc) and mean class accuracy
(mAcc), all in percent.
"""

from __future__ import annotations

import torch

from ...data.padded import PaddedTargets, plain_targets
from ..base import Processes
from .config import IGNORE_INDEX

__all__ = ["confusion_matrix", "scores", "SegmentationMetrics"]


def confusion_matrix(
    pred: torch.Tensor, target: torch.Tensor, num_classes: int, ignore_index: int = IGNORE_INDEX
) -> torch.Tensor:
    """(K, K) int64 counts of (true, predicted) class pairs over pixels whose label is not ignored.

    Labels other than ``ignore_index`` outside [0, K) are an error (a mask of another data set).
    """
    target = target.long()
    valid = target != ignore_index
    target, pred = target[valid], pred.long()[valid]
    bad = target[(target < 0) | (target >= num_classes)]
    if bad.numel():
        raise ValueError(
            f"label {int(bad[0])} is outside the {num_classes} classes [0, {num_classes}) and is not the ignored "
            f"label {ignore_index}; check num_classes against the masks"
        )
    counts = torch.bincount(target * num_classes + pred, minlength=num_classes * num_classes)
    return counts.view(num_classes, num_classes)


def scores(matrix: torch.Tensor) -> dict[str, float]:
    """mIoU, aAcc and mAcc (percent) of a confusion matrix; an empty matrix gives {}."""
    m = matrix.double()
    total = m.sum()
    if total == 0:
        return {}
    tp = m.diagonal()
    labelled, predicted = m.sum(1), m.sum(0)
    union = labelled + predicted - tp
    iou = tp[union > 0] / union[union > 0]
    acc = tp[labelled > 0] / labelled[labelled > 0]
    return {
        "miou": 100.0 * iou.mean().item(),
        "aacc": 100.0 * (tp.sum() / total).item(),
        "macc": 100.0 * acc.mean().item(),
    }


class SegmentationMetrics:
    """Loss sums and a confusion matrix; the interface of the engine's running metrics."""

    def __init__(self, num_classes: int, device: torch.device | str = "cpu", ignore_index: int = IGNORE_INDEX) -> None:
        self.num_classes = num_classes
        self.ignore_index = ignore_index
        self.loss = torch.zeros(2, dtype=torch.float64, device=device)
        """[samples, loss sum]"""
        self.matrix = torch.zeros(num_classes, num_classes, dtype=torch.float64, device=device)

    def add_loss(self, loss: torch.Tensor, n: int) -> None:
        """Add a batch's mean loss over ``n`` images."""
        self.loss[0] += n
        self.loss[1] += loss.detach().double() * n

    @torch.no_grad()
    def add_predictions(self, outputs: torch.Tensor, targets: torch.Tensor | PaddedTargets) -> None:
        """Add a batch of logits (B, K, H, W) against masks (B, H, W) (padded pixels are ignored)."""
        matrix = confusion_matrix(outputs.argmax(1), plain_targets(targets), self.num_classes, self.ignore_index)
        self.matrix += matrix.to(self.matrix)

    def reduced(self, processes: Processes) -> SegmentationMetrics:
        """A copy summed over every process."""
        out = SegmentationMetrics(self.num_classes, self.matrix.device, self.ignore_index)
        sums = torch.tensor(self.state(), dtype=torch.float64, device=self.matrix.device)
        out.load_state(processes.sum(sums).tolist())
        return out

    def compute(self) -> dict[str, float]:
        """loss, miou, aacc and macc (percent)."""
        samples, total = self.loss.tolist()
        return ({"loss": total / samples} if samples else {}) | scores(self.matrix)

    def state(self) -> list[float]:
        """Loss sums then the matrix, as plain floats, for a checkpoint."""
        return self.loss.tolist() + self.matrix.flatten().tolist()

    def load_state(self, state: list[float]) -> None:
        """Restore sums saved by :meth:`state`."""
        values = torch.tensor(state, dtype=torch.float64, device=self.matrix.device)
        self.loss.copy_(values[:2])
        self.matrix.copy_(values[2:].view_as(self.matrix))
