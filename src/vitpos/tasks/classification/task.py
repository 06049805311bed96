"""Classification and regression: one output vector per image, cross entropy or MSE, top-1/top-5 or R².

Both are the task of the hosts' own head (a ViT, PVT or Swin classifier; for regression the head
has one output per target); the metrics are :class:`~.metrics.RunningMetrics`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ...data.dataset import DataInfo
from ...data.transforms import soft_cross_entropy
from ..base import TaskKind, loss_precision, register_task
from .metrics import RunningMetrics

__all__ = ["ImageTask", "task_loss"]


def task_loss(outputs: torch.Tensor, targets: torch.Tensor, task: str, label_smoothing: float = 0.0) -> torch.Tensor:
    """Cross entropy (hard or soft targets) for classification, mean squared error for regression."""
    outputs = loss_precision(outputs)
    if task == "regression":
        return F.mse_loss(outputs, targets.to(outputs.dtype))
    if targets.is_floating_point():
        return soft_cross_entropy(outputs, targets)
    return F.cross_entropy(outputs, targets, label_smoothing=label_smoothing)


class ImageTask:
    """Classification or regression: one output vector per image."""

    def __init__(self, info: DataInfo, model: nn.Module | None = None) -> None:
        self.name: str = info.task
        self.num_outputs = info.num_outputs

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
        return task_loss(outputs, targets, self.name, label_smoothing)

    def metrics(self, device: torch.device | str, image_hw: tuple[int, int] | None = None) -> RunningMetrics:
        return RunningMetrics(self.name, self.num_outputs, device)


for name, noun, headline, unit, decimals, percent_too in (
    ("classification", "a classifier", "acc1", "%", 1, ("acc5",)),
    ("regression", "a regressor", "r2", "R²", 3, ()),
):
    register_task(
        TaskKind(
            name,
            predicts="classification",
            noun=noun,
            headline=headline,
            unit=unit,
            decimals=decimals,
            presets="a classification preset (see `vitpos models --task classification`)",
            data="image-level data (synthetic:TASK, folder:PATH, cifar10:PATH, digits)",
            build=ImageTask,
            percent_too=percent_too,
        )
    )
