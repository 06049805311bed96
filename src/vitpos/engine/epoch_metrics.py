"""Each stack member's training metrics over its own epoch, computed when that epoch ends.

The members of a stack may end their epochs at different steps (training sets of different sizes).
Every step's losses, outputs and targets are kept on the device in a ring of the longest epoch's
length (three copies a step); when members' epochs end, their statistics are computed over their
epoch's steps at once (:class:`~.stack_metrics.StackMetrics`, batch by batch in order), a handful of
operations per epoch length instead of per step; for the study's tasks, to the last bit those of
:class:`~vitpos.tasks.classification.metrics.RunningMetrics` (``tests/engine/test_epoch_metrics.py``).
"""

from __future__ import annotations

import torch

from .stack_metrics import MemberTasks, StackMetrics

__all__ = ["EpochMetrics"]


class EpochMetrics:
    """The running training metrics of a stack whose epochs are at most ``length`` steps."""

    def __init__(self, tasks: MemberTasks, length: int) -> None:
        self.tasks, self.length = tasks, length
        self.kept: tuple[torch.Tensor, ...] = ()
        """The last ``length`` steps' losses (L, S), outputs (L, S, B, O) and targets (L, S, B, width)."""
        self._groups: dict[tuple[int, ...], MemberTasks] = {}

    @torch.no_grad()
    def add(self, step: int, losses: torch.Tensor, outputs: torch.Tensor, targets: torch.Tensor) -> None:
        """Keep step ``step``'s losses (S), outputs (S, B, O) and targets (S, B, width)."""
        batch = (losses, outputs, targets)
        if not self.kept:
            self.kept = tuple(torch.empty(self.length, *t.shape, dtype=t.dtype, device=t.device) for t in batch)
        for kept, t in zip(self.kept, batch, strict=True):
            kept[step % self.length] = t

    def compute(self, step: int, groups: list[tuple[int, list[int]]]) -> dict[int, dict[str, float]]:
        """The metrics of each member of ``groups`` ((steps per epoch, members), as
        :func:`~.member_course.by_epoch_length` gives them) over its epoch that ends with step ``step``."""
        device = self.kept[0].device
        out: dict[int, dict[str, float]] = {}
        for per_epoch, members in groups:
            if per_epoch > self.length or per_epoch > step + 1:
                raise ValueError(f"EpochMetrics: an epoch of {per_epoch} steps ending at step {step} is not kept")
            slots = torch.tensor([(step - k) % self.length for k in reversed(range(per_epoch))], device=device)
            index = torch.tensor(members, device=device)
            metrics = StackMetrics(self._tasks(tuple(members)), device)
            metrics.add(*(t[slots[:, None], index[None]] for t in self.kept))
            out |= dict(zip(members, metrics.compute(), strict=True))
        return out

    def _tasks(self, members: tuple[int, ...]) -> MemberTasks:
        """The tasks of ``members`` (each group ends its epochs again and again: built once)."""
        if members not in self._groups:
            self._groups[members] = self.tasks.subset(members)
        return self._groups[members]
