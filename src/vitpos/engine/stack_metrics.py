"""The members' losses and running metrics over stacked outputs, each reduced per member in one operation.

A stack may mix classification and regression members (the red-green study's tasks train in one
stack). Every member's targets sit in one (S, B, K) float tensor: a class label in column 0, or the
K regression targets. Both losses (and both kinds of statistics) are computed for the whole stack and
each member keeps its kind's, so the operations of a step do not depend on which member does what:
one traced graph serves any mix. The arithmetic per member is that of
:func:`~vitpos.tasks.classification.task.task_loss` and
:class:`~vitpos.tasks.classification.metrics.RunningMetrics`, to the last bit for a stack of one
(``tests/engine/test_stack_metrics.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from ..data.dataset import DataInfo
from ..tasks import loss_precision
from ..tasks.classification.metrics import metrics_from_sums

__all__ = ["IMAGE_TASKS", "MemberTasks", "StackMetrics", "member_losses"]

IMAGE_TASKS = ("classification", "regression")
"""Tasks with one output vector per image: their members stack."""


class MemberTasks:
    """Each member's task kind, targets width and label smoothing, as tensors for batched losses."""

    def __init__(self, infos: Sequence[DataInfo], device: torch.device, label_smoothing: float = 0.0) -> None:
        odd = sorted({i.task for i in infos} - set(IMAGE_TASKS))
        if odd:
            raise ValueError(f"stacked members need {' or '.join(IMAGE_TASKS)} tasks, got {', '.join(odd)}")
        self.infos = list(infos)
        self.kinds = [i.task for i in infos]
        self.regression = torch.tensor([k == "regression" for k in self.kinds], device=device)
        self.width = max([1] + [i.num_outputs for i in infos if i.task == "regression"])
        """Columns of the targets tensor: 1 (a class label) or the regression targets."""
        self.label_smoothing = label_smoothing

    def __len__(self) -> int:
        return len(self.kinds)

    def subset(self, members: Sequence[int]) -> MemberTasks:
        """The tasks of the members ``members``, in that order (same device and label smoothing)."""
        return MemberTasks([self.infos[i] for i in members], self.regression.device, self.label_smoothing)

    def targets(self, each: Sequence[torch.Tensor]) -> torch.Tensor:
        """Members' targets (labels (N,) or regression targets (N, K)) as one (S, N, width) float32 tensor."""
        return self.joined(each).view(len(each), -1, self.width)

    def joined(self, each: Sequence[torch.Tensor]) -> torch.Tensor:
        """Members' targets (labels (N_i,) or regression targets (N_i, K)), one member's after another, as one
        (sum N_i, width) float32 tensor: a few operations per kind of target, whatever the member count."""
        columns = [t.view(len(t), -1) for t in each]
        kinds: dict[tuple[torch.dtype, int], list[int]] = {}
        for i, t in enumerate(columns):
            kinds.setdefault((t.dtype, t.shape[1]), []).append(i)
        parts: dict[int, torch.Tensor] = {}
        for (_, width), members in kinds.items():
            block = torch.cat([columns[i] for i in members]).float()
            block = F.pad(block, (0, self.width - width)) if width < self.width else block
            if len(kinds) == 1:
                return block
            parts |= dict(zip(members, block.split([len(columns[i]) for i in members]), strict=True))
        return torch.cat([parts[i] for i in range(len(each))])

    def losses(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Each member's mean loss on its batch (S): cross entropy or mean squared error."""
        return member_losses(outputs, targets, self.regression, self.settings)

    @property
    def settings(self) -> tuple[frozenset[str], float]:
        """(the kinds of task in the stack, label smoothing): what :func:`member_losses` takes besides tensors."""
        return frozenset(self.kinds), self.label_smoothing

    def metrics(self, device: torch.device) -> StackMetrics:
        """Empty running metrics of every member."""
        return StackMetrics(self, device)


def member_losses(
    outputs: torch.Tensor, targets: torch.Tensor, regression: torch.Tensor, settings: tuple[frozenset[str], float]
) -> torch.Tensor:
    """Each member's mean loss (S) on its outputs (S, B, O) and targets (S, B, width): cross entropy, or
    mean squared error where ``regression`` (S, bool) says so (a function of tensors, for a compiled step)."""
    kinds, label_smoothing = settings
    outputs = loss_precision(outputs)
    members, batch = outputs.shape[:2]
    cross = squared = None
    if "classification" in kinds:
        labels = targets[..., 0]
        if "regression" in kinds:  # a regression member's column 0 is no label; its loss is not kept
            labels = torch.where(regression[:, None], 0, labels)
        flat = outputs.flatten(0, 1), labels.long().flatten()
        if members == 1:  # the single-model loss, value included, to the last bit
            cross = F.cross_entropy(*flat, label_smoothing=label_smoothing)[None]
        else:
            cross = (
                F.cross_entropy(*flat, reduction="none", label_smoothing=label_smoothing).view(members, batch).mean(1)
            )
    if "regression" in kinds:
        width = outputs.shape[-1]
        squared = (outputs - targets[..., :width].to(outputs.dtype)).square().mean((1, 2))
    if cross is None:
        return squared  # type: ignore[return-value]
    if squared is None:
        return cross
    return torch.where(regression, squared, cross)


class StackMetrics:
    """Every member's :class:`~vitpos.tasks.classification.metrics.RunningMetrics` sums, updated for the whole
    stack in a few operations: the sums of each member in a row of one (S, W) tensor, the sample counts
    (every member sees as many samples a batch) on the host."""

    def __init__(self, tasks: MemberTasks, device: torch.device) -> None:
        self.tasks = tasks
        self.sums = torch.zeros(len(tasks), max(3, 1 + 3 * tasks.width), dtype=torch.float64, device=device)
        """Per member: the loss sum, then its prediction statistics (``RunningMetrics.sums[3:]``)."""
        self.counts = [0, 0]
        """Samples whose loss, and whose predictions, were added."""

    @torch.no_grad()
    def add(self, losses: torch.Tensor, outputs: torch.Tensor | None, targets: torch.Tensor) -> None:
        """Add a batch: each member's mean loss (S) over B samples and, unless None, its outputs (S, B, O)
        against its targets (S, B, width); or several batches, each tensor with a leading steps axis, summed
        batch by batch in order, as that many calls would."""
        if losses.ndim == 1:
            losses, targets = losses[None], targets[None]
            outputs = None if outputs is None else outputs[None]
        steps, batch = len(losses), targets.shape[2]
        self.counts[0] += steps * batch
        columns = [(losses.double() * batch).T[..., None]]  # (S, steps, 1)
        if outputs is not None:
            self.counts[1] += steps * batch
            columns.append(self._predictions(loss_precision(outputs.transpose(0, 1)), targets.transpose(0, 1)))
        per_batch = torch.cat(columns, -1)  # (S, steps, columns): one row a batch
        self.sums[:, : per_batch.shape[-1]] += per_batch.cumsum(1)[:, -1] if steps > 1 else per_batch[:, 0]

    def _predictions(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """(S, steps, W - 1) from outputs (S, steps, B, O): per batch, top-1 hits, and top-5 hits where there are
        more than five classes (with fewer every sample is one: :meth:`compute` counts them), or sums of y, y²
        and squared residuals per target."""
        kinds = set(self.tasks.kinds)
        k = outputs.shape[-1]
        stats = []  # per sample: each kind's, then where the kinds mix, each member's own
        if "regression" in kinds:
            y, pred = targets[..., :k].double(), outputs.double()
            stats.append(torch.cat([y, y * y, (y - pred) ** 2], -1))
        if "classification" in kinds:
            found = outputs.topk(min(5, k), dim=-1).indices == targets[..., :1].long()
            hits = (found[..., :1] if k <= 5 else torch.stack([found[..., 0], found.any(-1)], -1)).double()
            stats.append(F.pad(hits, (0, 3 * k - hits.shape[-1])) if stats else hits)
        if len(stats) == 2:
            stats = [torch.where(self.tasks.regression[:, None, None, None], stats[0], stats[1])]
        per_sample = stats[0].flatten(0, 1)  # (S * steps, B, W - 1): reduced as one batch's, to its bits
        return per_sample.sum(1).view(*outputs.shape[:2], -1)

    def compute(self) -> list[dict[str, float]]:
        """Each member's metrics, as ``RunningMetrics.compute`` gives them, from one copy of the sums."""
        out = []
        losses, predicted = self.counts
        for row, info in zip(self.sums.tolist(), self.tasks.infos, strict=True):
            sums = [losses, row[0], predicted, *row[1:]]
            if info.task == "classification":
                sums = sums[:5] if info.num_outputs > 5 else [*sums[:4], predicted]  # five classes or fewer: all top-5
            out.append(metrics_from_sums(info.task, info.num_outputs, sums))
        return out
