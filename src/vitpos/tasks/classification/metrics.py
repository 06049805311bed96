"""Running metrics as sums, so they add up exactly over batches and over processes.

Classification: loss, top-1 and top-5 accuracy. Regression: loss and R² (thesis Eq. 5),
1 - sum (y - y_hat)^2 / sum (y - mean y)^2 per target, averaged over targets (scikit-learn's
``r2_score`` default for several targets).
"""

from __future__ import annotations

import torch

from ..base import Processes

__all__ = ["RunningMetrics", "metrics_from_sums"]


class RunningMetrics:
    """Sums of loss and of prediction statistics; :meth:`compute` turns them into metrics.

    Layout of ``sums``: [loss samples, loss sum, predicted samples, then per task:
    correct top-1, correct top-5 (classification) or sum y, sum y^2, sum residual^2 per target].
    """

    def __init__(self, task: str, num_outputs: int, device: torch.device | str = "cpu") -> None:
        self.task = task
        self.num_outputs = num_outputs
        width = 5 if task == "classification" else 3 + 3 * num_outputs
        self.sums = torch.zeros(width, dtype=torch.float64, device=device)

    def add_loss(self, loss: torch.Tensor, n: int) -> None:
        """Add a batch's mean loss over ``n`` samples."""
        self.sums[0] += n
        self.sums[1] += loss.detach().double() * n

    @torch.no_grad()
    def add_predictions(self, outputs: torch.Tensor, targets: torch.Tensor) -> None:
        """Add a batch of model outputs against hard labels or regression targets."""
        self.sums[2] += len(outputs)
        if self.task == "classification":
            k = min(5, outputs.shape[-1])
            top = outputs.topk(k, dim=-1).indices
            hits = top == targets.view(-1, 1)
            self.sums[3] += hits[:, 0].sum()
            self.sums[4] += hits.any(dim=-1).sum()
        else:
            y, pred = targets.double(), outputs.double()
            k = self.num_outputs
            self.sums[3 : 3 + k] += y.sum(0)
            self.sums[3 + k : 3 + 2 * k] += (y * y).sum(0)
            self.sums[3 + 2 * k :] += ((y - pred) ** 2).sum(0)

    def reduced(self, processes: Processes) -> RunningMetrics:
        """A copy summed over every process."""
        out = RunningMetrics(self.task, self.num_outputs, self.sums.device)
        out.sums = processes.sum(self.sums.clone())
        return out

    def compute(self) -> dict[str, float]:
        """loss and acc1/acc5 (percent; acc5 only with more than five classes) or r2."""
        return metrics_from_sums(self.task, self.num_outputs, self.sums.tolist())

    def state(self) -> list[float]:
        """The sums as plain floats, for a checkpoint."""
        return self.sums.tolist()

    def load_state(self, state: list[float]) -> None:
        """Restore sums saved by :meth:`state`."""
        self.sums.copy_(torch.tensor(state, dtype=torch.float64))


def metrics_from_sums(task: str, num_outputs: int, s: list[float]) -> dict[str, float]:
    """:meth:`RunningMetrics.compute` on sums already read to the host (the layout of ``RunningMetrics.sums``)."""
    out: dict[str, float] = {}
    if s[0]:
        out["loss"] = s[1] / s[0]
    n = s[2]
    if not n:
        return out
    if task == "classification":
        out["acc1"] = 100.0 * s[3] / n
        if num_outputs > 5:
            out["acc5"] = 100.0 * s[4] / n
        return out
    k = num_outputs
    scores = []
    for sum_y, sum_y2, ss_res in zip(s[3 : 3 + k], s[3 + k : 3 + 2 * k], s[3 + 2 * k : 3 + 3 * k], strict=True):
        ss_tot = sum_y2 - sum_y * sum_y / n
        # a constant target: perfect if predicted exactly, else 0 (as scikit-learn does)
        scores.append(1.0 - ss_res / ss_tot if ss_tot > 0 else float(ss_res == 0))
    out["r2"] = sum(scores) / k
    return out
