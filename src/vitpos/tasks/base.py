"""What the engine and the study know of a task: a :class:`TaskKind` found by the data's task name.

A task package (:mod:`.classification`, :mod:`.detection`, :mod:`.segmentation`) registers one
:class:`TaskKind` per task its data can name: what the model must predict, the headline
metric, which presets and data fit it, and how to build the :class:`Task` (loss and metrics)
for a model. The trainer, :func:`~vitpos.engine.evaluate.evaluate` and the study ask
:func:`task_for` and use only what :class:`Task` and :class:`Metrics` declare, so a new kind of
output plugs in as one more package without touching them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import nn

from ..data.dataset import DataInfo
from ..errors import VitposError
from ..registry import TASKS

__all__ = [
    "Processes",
    "Metrics",
    "Task",
    "TaskKind",
    "register_task",
    "task_for",
    "task_kind",
    "model_task",
    "primary_metric",
    "loss_precision",
]

DEFAULT_PREDICTS = "classification"
"""What a model predicts when its config says nothing: one output vector per image."""


class Processes(Protocol):
    """The processes of a run, as metrics sum and gather over them (the engine's ``Dist``)."""

    @property
    def enabled(self) -> bool:
        """More than one process."""
        ...

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` summed over every process (in place)."""
        ...

    def gather(self, items: list[Any]) -> list[Any]:
        """Every process's ``items``, concatenated in rank order."""
        ...


class Metrics(Protocol):
    """Running sums of a task's loss and predictions, exact over batches and processes."""

    def add_loss(self, loss: torch.Tensor, n: int) -> None:
        """Add a batch's mean loss over ``n`` images."""
        ...

    def add_predictions(self, outputs: Any, targets: torch.Tensor) -> None:
        """Add a batch of model outputs against its targets."""
        ...

    def reduced(self, processes: Processes) -> Metrics:
        """A copy summed over every process."""
        ...

    def compute(self) -> dict[str, float]:
        """The metrics by name."""
        ...

    def state(self) -> list[float]:
        """The sums as plain floats, for a checkpoint."""
        ...

    def load_state(self, state: list[float]) -> None:
        """Restore sums saved by :meth:`state`."""
        ...


class Task(Protocol):
    """A task's loss and metrics for one model and data set."""

    name: str

    def loss(self, outputs: Any, targets: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
        """The training loss of a batch (mean over its images)."""
        ...

    def metrics(self, device: torch.device | str, image_hw: tuple[int, int] | None = None) -> Metrics:
        """Empty metrics; ``image_hw``: the size of the evaluated images (detection: AP is computed only then)."""
        ...


@dataclass(frozen=True)
class TaskKind:
    """A registered task: the data's task name, what it needs of a model, how its :class:`Task` is built."""

    name: str
    """The data's task (``DataInfo.task``)."""
    predicts: str
    """What the model must predict (its config's ``task``): ``classification`` is one vector per image."""
    noun: str
    """A model of this task, in words (``a detector``)."""
    headline: str
    """The headline metric, the key of :meth:`Metrics.compute` that tables and the study report."""
    unit: str
    """The headline's unit in table headers (``%``, ``R²``, ``AP, %``)."""
    decimals: int
    """Decimals a table shows of the headline."""
    presets: str
    """Which presets fit, in words, for error messages."""
    data: str
    """Which data specs fit, in words, for error messages."""
    build: Callable[[DataInfo, nn.Module], Task]
    """The task for data of this kind and a model."""
    recognises: Callable[[nn.Module], bool] = lambda model: False
    """Whether a model without a config predicts ``predicts`` (a detector: by its ``criterion()``)."""
    details: tuple[tuple[str, str], ...] = ()
    """Further metrics a results table shows beside the headline: (key of :meth:`Metrics.compute`, unit)."""
    percent_too: tuple[str, ...] = ()
    """Metrics in % besides those whose table unit says so (classification's ``acc5``)."""

    def is_percent(self, key: str) -> bool:
        """Whether metric ``key`` (optionally prefixed: ``train_``, ``val_``, ``ema_val_``) is a percentage."""
        units = dict([(self.headline, self.unit), *self.details, *((name, "%") for name in self.percent_too)])
        return any(u.endswith("%") for name, u in units.items() if key == name or key.endswith("_" + name))

    def format_metric(self, key: str, value: float) -> str:
        """``key value`` for a log line: a percentage with its sign (``val_AP 41.2%``), other metrics
        (losses, R²) as plain numbers."""
        return f"{key} {value:.{self.decimals}f}%" if self.is_percent(key) else f"{key} {value:.4g}"


def register_task(kind: TaskKind) -> TaskKind:
    """File ``kind`` under its name."""
    TASKS.add(kind.name, kind)
    return kind


def task_kind(name: str) -> TaskKind:
    """The registered task ``name``; an unknown name lists the valid ones."""
    return TASKS.get(name)


def model_task(model: nn.Module) -> str:
    """What ``model`` predicts: its config's ``task``, or that of a task recognising it, else one vector per image."""
    declared = getattr(getattr(model, "cfg", None), "task", None)
    if declared is not None:
        return declared
    kinds = (task_kind(name) for name in TASKS.names())
    return next((kind.predicts for kind in kinds if kind.recognises(model)), DEFAULT_PREDICTS)


def primary_metric(task: str) -> str:
    """The headline metric of task ``task``: ``acc1``, ``r2``, ``AP`` (detection) or ``miou`` (segmentation)."""
    return task_kind(task).headline


def task_for(info: DataInfo, model: nn.Module) -> Task:
    """The task of ``info``'s data for ``model``; a model that predicts something else is an error."""
    kind = task_kind(info.task)
    predicts = model_task(model)
    if predicts != kind.predicts:
        if predicts == DEFAULT_PREDICTS:
            problem, fix = f"is not {kind.noun}", f"use {kind.presets}"
        else:
            own = task_kind(predicts)
            problem, fix = f"is {own.noun}", f"use {own.data}"
        raise VitposError(f"{info.spec} is a {info.task} task, but the model ({type(model).__name__}) {problem}; {fix}")
    return kind.build(info, model)


def loss_precision(outputs: Any) -> Any:
    """Outputs in at least float32: bf16/fp16 autocast outputs are upcast, a float64 model stays float64;
    the tensors of a detector's output dict (and its lists) likewise."""
    if isinstance(outputs, dict):
        return {k: loss_precision(v) for k, v in outputs.items()}
    if isinstance(outputs, list):
        return [loss_precision(v) for v in outputs]
    if isinstance(outputs, tuple) and hasattr(outputs, "_make"):  # a named tuple (a distiller's outputs)
        return outputs._make(loss_precision(v) for v in outputs)
    return outputs if outputs.dtype == torch.float64 else outputs.float()
