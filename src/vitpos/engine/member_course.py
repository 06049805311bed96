"""A stack member's course: its epochs, learning-rate schedule and evaluations (:class:`Course`), and the rule
that stops it early (:class:`Stopping`, applied by :class:`Watch`).

Members of one stack may follow different courses (training sets of different sizes, so different steps per
epoch; different caps): :func:`by_epoch_length` groups them where their epochs are drawn together.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .config import TrainConfig
from .optim import WarmupCosine

__all__ = ["Course", "Stopping", "Watch", "by_epoch_length"]


@dataclass(frozen=True)
class Stopping:
    """Stop a member when its validation metric (acc1 or R², evaluated every epoch) has not improved
    for ``patience`` epochs, but not before epoch ``min_epochs``, or at once when it reaches ``solved``
    for its metric; the member ends with the weights of its best epoch. ``TrainConfig.epochs`` is the
    cap (and the length of the schedule)."""

    patience: int = 5
    min_epochs: int = 0
    """No stop by patience before this epoch: a run on an early plateau gets time to leave it."""
    min_delta: float = 0.0
    """Smallest rise that counts as an improvement."""
    solved: tuple[tuple[str, float], ...] = (("acc1", 100.0), ("r2", 0.99))
    """(metric, value) pairs: a member whose validation metric reaches the value is done."""

    def __post_init__(self) -> None:
        if self.patience < 1 or self.min_delta < 0:
            raise ValueError(f"Stopping needs patience >= 1 and min_delta >= 0, got {self.patience}, {self.min_delta}")


class Watch:
    """One member's stopping state: its best validation metric and epoch."""

    def __init__(self, rule: Stopping, key: str) -> None:
        self.rule, self.key = rule, key
        self.best, self.best_epoch = -math.inf, 0
        self.stop: str | None = None

    def update(self, epoch: int, metrics: dict[str, float]) -> bool:
        """Record the metrics of ``epoch`` and say whether it is the best so far (its weights are then to be
        kept); sets ``stop`` to ``solved`` or ``patience`` when the member is done."""
        value = metrics[self.key]
        improved = value > self.best + self.rule.min_delta or self.best_epoch == 0
        if improved:
            self.best, self.best_epoch = value, epoch
        if value >= dict(self.rule.solved).get(self.key, math.inf):
            self.stop = "solved"
        elif epoch - self.best_epoch >= self.rule.patience and epoch >= self.rule.min_epochs:
            self.stop = "patience"
        return improved


class Course:
    """A member's course through the stack's steps: its epochs, their steps, its schedule and evaluations."""

    def __init__(self, cfg: TrainConfig, per_epoch: int) -> None:
        self.cfg, self.per_epoch = cfg, per_epoch
        self.steps = cfg.epochs * per_epoch
        cosine_end = (cfg.epochs - cfg.cooldown_epochs) * per_epoch
        self.rate = WarmupCosine(cfg.peak_lr, cfg.min_lr, round(cfg.warmup_epochs * per_epoch), cosine_end)
        """The learning rate of each optimiser step, as the single-model trainer schedules it."""

    def evaluates(self, step: int) -> bool:
        """Whether the epoch that ends at ``step`` is evaluated (every ``eval_every`` epochs, and the last)."""
        epoch = step // self.per_epoch
        return epoch % self.cfg.eval_every == 0 or epoch == self.cfg.epochs


def by_epoch_length(which: list[int], courses: list[Course]) -> list[tuple[int, list[int]]]:
    """The members ``which`` grouped by their steps per epoch."""
    groups: dict[int, list[int]] = {}
    for i in which:
        groups.setdefault(courses[i].per_epoch, []).append(i)
    return list(groups.items())
