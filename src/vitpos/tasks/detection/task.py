"""The detection task: DETR's set loss (:mod:`.criterion`) and COCO's AP on the predictions (:mod:`.coco_eval`).

A detector's output is DETR's dict; its targets are padded object rows (:mod:`vitpos.data.objects`),
for batches of images of different sizes inside :class:`~vitpos.data.padded.PaddedTargets`: the
boxes are then normalised by each image's own size (the loss is DETR's as it is), and AP is
computed in each image's original pixels. The loss is the model's own criterion (its loss weights
are part of its config).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import torch
from torch import nn

from ...data.dataset import DataInfo
from ...data.objects import ObjectTargets, unpad_objects
from ...data.padded import PaddedTargets, plain_targets
from ...errors import VitposError
from ..base import Processes, TaskKind, register_task
from .coco_eval import coco_metrics
from .postprocess import Detections, postprocess

__all__ = ["DetectionTask", "DetectionMetrics", "Detector"]


class DetectionMetrics:
    """The mean loss, and with ``image_hw`` (evaluation) COCO's AP over every prediction, gathered
    from all processes. Training runs leave AP out: it needs every prediction of the epoch."""

    def __init__(
        self,
        num_classes: int,
        device: torch.device | str,
        image_hw: tuple[int, int] | None = None,
        detections: Callable[[Any, torch.Tensor], list[Detections]] = postprocess,
    ) -> None:
        self.num_classes = num_classes
        self.image_hw = image_hw
        self.detections = detections
        self.sums = torch.zeros(2, dtype=torch.float64, device=device)
        self.images: list[tuple[ObjectTargets, Detections, tuple[int, int]]] = []

    def add_loss(self, loss: torch.Tensor, n: int) -> None:
        self.sums[0] += n
        self.sums[1] += loss.detach().double() * n

    def add_predictions(self, outputs: dict, targets: torch.Tensor | PaddedTargets) -> None:
        """Keep the batch's targets and detections for AP (only in evaluation, where the image size was given),
        at each image's original size where the batch carries them."""
        if self.image_hw is None:
            return
        if isinstance(targets, PaddedTargets):
            sizes = [(int(h), int(w)) for h, w in targets.sizes.tolist()]
        else:
            sizes = [self.image_hw] * len(targets)
        cpu = lambda d: Detections(d.scores.cpu(), d.labels.cpu(), d.boxes.cpu())  # noqa: E731
        objects = [ObjectTargets(t.labels.cpu(), t.boxes.cpu()) for t in unpad_objects(plain_targets(targets))]
        detections = self.detections(outputs, torch.tensor(sizes))
        self.images += [(t, cpu(d), hw) for t, d, hw in zip(objects, detections, sizes, strict=True)]

    def reduced(self, processes: Processes) -> DetectionMetrics:
        out = DetectionMetrics(self.num_classes, self.sums.device, self.image_hw, self.detections)
        out.sums = processes.sum(self.sums.clone())
        out.images = list(self.images)
        if processes.enabled and self.image_hw is not None:
            out.images = processes.gather(self.images)
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
    """A detector builds its own loss (DETR's set loss, RetinaNet's focal loss); one with a
    ``postprocess(outputs, sizes)`` method turns its outputs into detections itself (else DETR's)."""

    def criterion(self) -> nn.Module: ...


class DetectionTask:
    """The model's own loss (its :meth:`criterion`) and COCO AP of its detections."""

    name = "detection"

    def __init__(self, info: DataInfo, model: nn.Module) -> None:
        if not isinstance(model, Detector):
            raise VitposError(f"{type(model).__name__} predicts objects but builds no loss (criterion())")
        self.num_classes = info.num_outputs
        self.criterion = model.criterion()
        self.detections = getattr(model, "postprocess", postprocess)

    def loss(self, outputs: Any, targets: torch.Tensor | PaddedTargets, label_smoothing: float = 0.0) -> torch.Tensor:
        rows = plain_targets(targets)
        return self.criterion.to(rows.device)(outputs, rows)

    def metrics(self, device: torch.device | str, image_hw: tuple[int, int] | None = None) -> DetectionMetrics:
        return DetectionMetrics(self.num_classes, device, image_hw, self.detections)


register_task(
    TaskKind(
        "detection",
        predicts="detection",
        noun="a detector",
        headline="AP",
        unit="AP, %",
        decimals=1,
        presets="a detr_* or retinanet_* preset (see `vitpos models --task detection`)",
        data="detection data (synthetic:detect, coco:PATH)",
        build=DetectionTask,
        recognises=lambda model: isinstance(model, Detector),
        details=tuple((key, f"{key}, %") for key in ("AP50", "AP75", "APs", "APm", "APl")),
    )
)
