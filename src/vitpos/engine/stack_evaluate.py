"""Evaluate every member of a stack in one pass: one stacked forward per batch, each member on its own split.

The members' splits are held as one tensor (:class:`~.stack_data.MemberSplits`), so a batch of every
member is one slice, one normalisation, one forward, one loss and one metrics update, whatever the
member count. :class:`StackEvaluation` holds the splits, so that an evaluation repeated every epoch
gathers them once.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ..data.dataset import ImageDataset
from .evaluate import evaluate, input_dtype
from .precision import Precision
from .stack_data import MemberSplits
from .stack_metrics import IMAGE_TASKS, MemberTasks
from .stacked_step import Stack

__all__ = ["stackable", "StackEvaluation", "evaluate_models", "evaluate_stack"]


def stackable(datasets: Sequence[ImageDataset]) -> bool:
    """Whether the members' splits can be evaluated as one stack: image-level tasks, one length, one image size."""
    return (
        all(d.info.task in IMAGE_TASKS for d in datasets)
        and len({len(d) for d in datasets}) == 1
        and len({d.image_size for d in datasets}) == 1
    )


class StackEvaluation:
    """Every member's split ``datasets[i]``, held once (an evaluation during training repeats every epoch):
    calling it evaluates the stack on them, as :func:`~.evaluate.evaluate` evaluates each model alone."""

    def __init__(self, datasets: Sequence[ImageDataset], device: torch.device) -> None:
        if not stackable(datasets):
            raise ValueError("stacked evaluation: the members' splits differ in task kind, length or image size")
        self.tasks = MemberTasks([d.info for d in datasets], device)
        self.splits = MemberSplits(datasets, self.tasks, device)
        self.rows = self.splits.global_index(torch.arange(len(datasets[0])).expand(len(datasets), -1))  # S, N
        self._subsets: dict[tuple[int, ...], tuple[torch.Tensor, MemberTasks, torch.Tensor]] = {}

    def _subset(self, members: tuple[int, ...]) -> tuple[torch.Tensor, MemberTasks, torch.Tensor]:
        """The index, tasks and split rows of the members ``members`` (a stack's groups evaluate again and
        again: each is built once)."""
        if members not in self._subsets:
            index = torch.tensor(members, device=self.rows.device)
            tasks = self.tasks.subset(members)
            self._subsets[members] = index, tasks, self.rows[index]
        return self._subsets[members]

    @torch.no_grad()
    def __call__(
        self, stack: Stack, *, batch_size: int, precision: Precision, members: list[int] | None = None
    ) -> list[dict[str, float]]:
        """Loss and metrics of each member (or of the members ``members``, in that order) on its split,
        ``batch_size`` images of each member a forward: the other members are not run."""
        was_training = stack.base.training
        stack.train(False)
        index, tasks, rows, weights = None, self.tasks, self.rows, None
        if members is not None:
            index, tasks, rows = self._subset(tuple(members))
            weights = stack.gathered(index)  # once a pass: these rows' weights as they are now
        metrics = tasks.metrics(rows.device)
        dtype = input_dtype(stack.base)
        for batch in rows.split(batch_size, dim=1):
            images, targets = self.splits.batch(batch)
            x = self.splits.normalized(images, scaled_first=True, members=index).to(dtype)
            with precision.autocast():
                outputs = stack(x, weights)
            metrics.add(tasks.losses(outputs, targets), outputs, targets)
        stack.train(was_training)
        return metrics.compute()


def evaluate_models(
    models: Sequence[nn.Module],
    datasets: Sequence[ImageDataset],
    *,
    batch_size: int,
    device: torch.device,
    precision: Precision | None = None,
) -> list[dict[str, float]]:
    """Loss and metrics of model i on ``datasets[i]``, as :func:`~.evaluate.evaluate` gives them: one stacked pass
    (:func:`evaluate_stack`) where there are several models of one config whose splits stack, else model by
    model. The models are only read."""
    precision = precision or Precision(device.type)
    if len(models) > 1 and len({repr(getattr(m, "cfg", id(m))) for m in models}) == 1 and stackable(datasets):
        stack = Stack(list(models), device=device)
        return evaluate_stack(stack, datasets, batch_size=batch_size, device=device, precision=precision)
    return [
        evaluate(m, d, batch_size=batch_size, device=device, precision=precision)
        for m, d in zip(models, datasets, strict=True)
    ]


def evaluate_stack(
    stack: Stack, datasets: Sequence[ImageDataset], *, batch_size: int, device: torch.device, precision: Precision
) -> list[dict[str, float]]:
    """Loss and metrics of member i on ``datasets[i]``, as :func:`~.evaluate.evaluate` gives them for
    its model alone; the splits must be :func:`stackable`."""
    return StackEvaluation(datasets, device)(stack, batch_size=batch_size, precision=precision)
