"""What the engine needs to know about a task: its loss and its metrics.

The trainer and :func:`~vitpos.engine.evaluate.evaluate` ask :func:`task_for` for the task of
the data and model at hand, and use only :class:`Task`'s two methods, so a new kind of output
(detection, segmentation) plugs in here without touching the training loop:

* ``image`` tasks (classification, regression): one output vector per image, cross entropy or
  MSE, top-1/top-5 or R² (:class:`~vitpos.engine.metrics.RunningMetrics`);
* ``detection``: DETR's output dict, its set loss (:mod:`vitpos.detection.criterion`), and
  COCO's AP on the predictions (:class:`DetectionMetrics`, evaluation only);
* ``segmentation``: per-pixel logits, cross entropy over labelled pixels, and mIoU from a
  confusion matrix (:class:`~vitpos.segmentation.task.SegmentationTask`).

A metrics object has ``add_loss(loss, n)``, ``add_predictions(outputs, targets)``,
``reduced(ctx)``, ``compute()``, ``state()`` and ``load_state(state)``.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import torch
import torch.nn.functional as F
from torch import nn

from ..data.dataset import DataInfo
from ..data.transforms import soft_cross_entropy
from ..detection.coco_eval import coco_metrics
from ..detection.postprocess import Detections, postprocess
from ..detection.targets import ObjectTargets, unpad_objects
from ..errors import VitposError
from ..segmentation.task import SegmentationTask
from .distributed import Dist, all_reduce_sum
from .metrics import RunningMetrics

__all__ = ["Task", "ImageTask", "DetectionTask", "DetectionMetrics", "task_for", "task_loss", "loss_precision"]


def loss_precision(outputs: Any) -> Any:
    """Outputs in at least float32: bf16/fp16 autocast outputs are upcast, a float64 model stays float64;
    the tensors of a detector's output dict (and its lists) likewise."""
    if isinstance(outputs, dict):
        return {k: loss_precision(v) for k, v in outputs.items()}
    if isinstance(outputs, list):
        return [loss_precision(v) for v in outputs]
    return outputs if outputs.dtype == torch.float64 else outputs.float()


def task_loss(outputs: torch.Tensor, targets: torch.Tensor, task: str, label_smoothing: float = 0.0) -> torch.Tensor:
    """Cross entropy (hard or soft targets) for classification, mean squared error for regression."""
    outputs = loss_precision(outputs)
    if task == "regression":
        return F.mse_loss(outputs, targets.to(outputs.dtype))
    if targets.is_floating_point():
        return soft_cross_entropy(outputs, targets)
    return F.cross_entropy(outputs, targets, label_smoothing=label_smoothing)


class Task(Protocol):
    """A task's loss and metrics."""

    name: str

    def loss(self, outputs: Any, targets: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor: ...

    def metrics(self, device: torch.device | str, image_hw: tuple[int, int] | None = None) -> Any:
        """Empty metrics; ``image_hw``: the size of the evaluated images (detection: AP is computed only then)."""
        ...


class ImageTask:
    """Classification or regression: one output vector per image."""

    def __init__(self, info: DataInfo) -> None:
        self.name: str = info.task
        self.num_outputs = info.num_outputs

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
        return task_loss(outputs, targets, self.name, label_smoothing)

    def metrics(self, device: torch.device | str, image_hw: tuple[int, int] | None = None) -> RunningMetrics:
        return RunningMetrics(self.name, self.num_outputs, device)


class DetectionMetrics:
    """The mean loss, and with ``image_hw`` (evaluation) COCO's AP over every prediction, gathered
    from all processes. Training runs leave AP out: it needs every prediction of the epoch."""

    def __init__(self, num_classes: int, device: torch.device | str, image_hw: tuple[int, int] | None = None) -> None:
        self.num_classes = num_classes
        self.image_hw = image_hw
        self.sums = torch.zeros(2, dtype=torch.float64, device=device)
        self.images: list[tuple[ObjectTargets, Detections, tuple[int, int]]] = []

    def add_loss(self, loss: torch.Tensor, n: int) -> None:
        self.sums[0] += n
        self.sums[1] += loss.detach().double() * n

    def add_predictions(self, outputs: dict, targets: torch.Tensor) -> None:
        """Keep the batch's targets and detections for AP (only where the image size was given)."""
        image_hw = self.image_hw
        if image_hw is None:
            return
        cpu = lambda d: Detections(d.scores.cpu(), d.labels.cpu(), d.boxes.cpu())  # noqa: E731
        objects = [ObjectTargets(t.labels.cpu(), t.boxes.cpu()) for t in unpad_objects(targets)]
        self.images += [(t, cpu(d), image_hw) for t, d in zip(objects, postprocess(outputs, image_hw), strict=True)]

    def reduced(self, ctx: Dist) -> DetectionMetrics:
        out = DetectionMetrics(self.num_classes, self.sums.device, self.image_hw)
        out.sums = all_reduce_sum(self.sums.clone(), ctx)
        out.images = list(self.images)
        if ctx.enabled and self.image_hw is not None:
            gathered: list[Any] = [None] * ctx.world_size
            torch.distributed.all_gather_object(gathered, self.images)
            out.images = [image for part in gathered for image in part]
        return out

    def compute(self) -> dict[str, float]:
        """``loss``, and AP, AP50, AP75, APs, APm, APl in evaluation."""
        s = self.sums.tolist()
        out = {"loss": s[1] / s[0]} if s[0] else {}
        if self.images:
            targets, detections, sizes = zip(*self.images, strict=True)
            out |= coco_metrics(list(targets), list(detections), list(sizes), self.num_classes)
        return out

    def state(self) -> list[float]:
        return self.sums.tolist()

    def load_state(self, state: list[float]) -> None:
        self.sums.copy_(torch.tensor(state, dtype=torch.float64))


@runtime_checkable
class Detector(Protocol):
    """A model trained with a set loss (DETR): it builds its own criterion."""

    def criterion(self) -> nn.Module: ...


class DetectionTask:
    """DETR's set loss (the model's :meth:`criterion`) and COCO AP."""

    name = "detection"

    def __init__(self, info: DataInfo, model: Detector) -> None:
        self.num_classes = info.num_outputs
        self.criterion = model.criterion()

    def loss(self, outputs: dict, targets: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
        return self.criterion.to(targets.device)(outputs, targets)

    def metrics(self, device: torch.device | str, image_hw: tuple[int, int] | None = None) -> DetectionMetrics:
        return DetectionMetrics(self.num_classes, device, image_hw)


def task_for(info: DataInfo, model: nn.Module) -> Task:
    """The task of ``info``'s data for ``model``; a detector or segmenter on other data (or the reverse) is an error."""
    detector = isinstance(model, Detector)
    if (info.task == "detection") != detector:
        kind = "a detector" if detector else "not a detector"
        raise VitposError(
            f"{info.spec} is a {info.task} task, but the model ({type(model).__name__}) is {kind}; "
            + (
                "use a detr_* preset (see `vitpos models detr*`)"
                if info.task == "detection"
                else "use detection data (synthetic:detect, coco:PATH)"
            )
        )
    segmenter = getattr(getattr(model, "cfg", None), "task", None) == "segmentation"
    if (info.task == "segmentation") != segmenter:
        kind = "a segmenter" if segmenter else "not a segmenter"
        raise VitposError(
            f"{info.spec} is a {info.task} task, but the model ({type(model).__name__}) is {kind}; "
            + (
                "use a *_fpn preset (see `vitpos models --task segmentation`)"
                if info.task == "segmentation"
                else "use segmentation data (synthetic:segment, masks:PATH)"
            )
        )
    if segmenter:
        return SegmentationTask(info)
    if isinstance(model, Detector):
        return DetectionTask(info, model)
    return ImageTask(info)
