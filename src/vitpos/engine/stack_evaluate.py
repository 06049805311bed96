"""Evaluate every member of a stack in one pass: one stacked forward per batch, each member on its own split."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..data.dataset import ImageDataset, iterate_batches
from ..data.transforms import normalize, to_float
from ..tasks import loss_precision, task_for
from .distributed import Dist, eval_batches
from .evaluate import input_dtype
from .precision import Precision
from .stacked_step import Stack

__all__ = ["stackable", "evaluate_stack"]

_IMAGE_TASKS = ("classification", "regression")
"""Tasks with one output vector per image: their batches need no padding, so members stack."""


def stackable(datasets: Sequence[ImageDataset]) -> bool:
    """Whether the members' splits can be evaluated as one stack: image-level tasks, one length, one image size."""
    return (
        all(d.info.task in _IMAGE_TASKS for d in datasets)
        and len({len(d) for d in datasets}) == 1
        and len({d.image_size for d in datasets}) == 1
    )


@torch.no_grad()
def evaluate_stack(
    stack: Stack, datasets: Sequence[ImageDataset], *, batch_size: int, device: torch.device, precision: Precision
) -> list[dict[str, float]]:
    """Loss and metrics of member i on ``datasets[i]``, as :func:`~.evaluate.evaluate` gives them for
    its model alone; the splits must be :func:`stackable`."""
    if not stackable(datasets):
        raise ValueError("evaluate_stack: the members' splits differ in task kind, length or image size")
    was_training = stack.base.training
    stack.train(False)
    tasks = [task_for(d.info, stack.base) for d in datasets]
    metrics = [task.metrics(device, image_hw=d.image_size) for task, d in zip(tasks, datasets, strict=True)]
    dtype = input_dtype(stack.base)
    batches = eval_batches(len(datasets[0]), batch_size, Dist())
    loaders = [iterate_batches(d, batches, 0, pin_memory=False) for d in datasets]
    for loaded in zip(*loaders, strict=True):
        xs, ys = [], []
        for (images, targets), d in zip(loaded, datasets, strict=True):
            xs.append(normalize(to_float(images.to(device)), d.info.mean, d.info.std).to(dtype))
            ys.append(targets.to(device))
        with precision.autocast():
            outputs = loss_precision(stack(torch.stack(xs)))
        for i, (task, running) in enumerate(zip(tasks, metrics, strict=True)):
            running.add_loss(task.loss(outputs[i], ys[i]), len(xs[i]))
            running.add_predictions(outputs[i], ys[i])
    stack.train(was_training)
    return [m.compute() for m in metrics]
