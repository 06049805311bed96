"""AdamW over one flat (members × parameters) buffer: every member its own learning rate, step count and stop.

The parameters of S members live in one (S, P) tensor (:class:`~.stacked_step.Stack`), the tensors
AdamW decays in its first columns; the moments are two more (S, P) tensors. Each member is one AdamW
with its own learning rate (the learning-rate trials of a study train in one stack) and its own step
count, and a stopped member's parameters and moments stay exactly as they were (its learning rate,
first-moment weight and second-moment decay become 0, 0 and 1, and its gradient 0, NaN included). So
one step is a fixed handful of operations over the whole buffer, whatever the member count, and it
reads the stops from a tensor: no host synchronisation.

The arithmetic is that of :func:`torch.optim.adamw` without ``foreach`` (the per-parameter loop
PyTorch runs on a CPU): the per-member scalars are computed in float64 and cast to the parameters'
dtype where PyTorch casts its Python scalars, so on a CPU a member's parameters are bit for bit those
of ``torch.optim.AdamW`` (``tests/engine/test_stacked_adamw.py`` checks it in float32).
"""

from __future__ import annotations

import torch

__all__ = ["StackedAdamW", "adamw_"]


class StackedAdamW:
    """AdamW on a flat (S, P) parameter buffer with per-member learning rates and stops.

    Columns ``[0, decayed)`` are decayed by ``weight_decay``; the others (norm scales, biases, the
    names a model exempts) are not.
    """

    def __init__(
        self,
        flat: torch.Tensor,
        decayed: int,
        weight_decay: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        if flat.ndim != 2 or not 0 <= decayed <= flat.shape[1]:
            raise ValueError(
                f"StackedAdamW: needs a (members, parameters) buffer and 0 <= decayed <= parameters, "
                f"got shape {tuple(flat.shape)} and decayed = {decayed}"
            )
        self.flat, self.decayed = flat, decayed
        self.weight_decay, self.betas, self.eps = weight_decay, betas, eps
        self.exp_avg = torch.zeros_like(flat)
        self.exp_avg_sq = torch.zeros_like(flat)
        self.steps = torch.zeros(flat.shape[0], dtype=torch.float64, device=flat.device)
        """Optimiser steps each member has taken (a stopped member's count stops with it)."""
        self.active = torch.ones(flat.shape[0], dtype=torch.bool, device=flat.device)
        """Members that still train; the others' parameters and moments are frozen."""

    @property
    def members(self) -> int:
        return int(self.steps.shape[0])

    def stop(self, member: int) -> None:
        """Freeze ``member``: from the next step on its parameters and moments no longer change."""
        self.active[member] = False

    @torch.no_grad()
    def step(self, grad: torch.Tensor, lr: torch.Tensor) -> None:
        """One AdamW step of every active member with gradient ``grad`` (S, P) at its learning rate ``lr``
        (S, float64)."""
        adamw_(self.flat, grad, self.exp_avg, self.exp_avg_sq, self.steps, self.active, lr, self.settings)

    @property
    def settings(self) -> tuple[int, float, tuple[float, float], float]:
        """(decayed columns, weight decay, betas, eps): what :func:`adamw_` takes besides tensors."""
        return self.decayed, self.weight_decay, self.betas, self.eps

    def state_of(self, member: int) -> dict[str, torch.Tensor]:
        """Copies of ``member``'s parameters, moments and step count (for tests and checks)."""
        return {
            "params": self.flat[member].clone(),
            "exp_avg": self.exp_avg[member].clone(),
            "exp_avg_sq": self.exp_avg_sq[member].clone(),
            "steps": self.steps[member].clone(),
        }


def adamw_(
    flat: torch.Tensor,
    grad: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    steps: torch.Tensor,
    active: torch.Tensor,
    lr: torch.Tensor,
    settings: tuple[int, float, tuple[float, float], float],
) -> None:
    """The step of :class:`StackedAdamW` on its tensors, in place (a function of tensors, for a compiled step)."""
    decayed, weight_decay, (beta1, beta2), eps = settings
    dtype = flat.dtype
    on = active.to(torch.float64)
    steps += on
    lr = lr.to(torch.float64) * on
    # as torch.optim.adamw's single-tensor loop computes its Python (double) scalars
    step_size = -(lr / (1 - beta1**steps))
    bias2_sqrt = (1 - beta2**steps) ** 0.5
    grad = torch.where(active[:, None], grad, 0)
    if weight_decay and decayed:
        flat[:, :decayed].mul_((1 - lr * weight_decay).to(dtype)[:, None])
    exp_avg.lerp_(grad, ((1 - beta1) * on).to(dtype)[:, None])
    exp_avg_sq.mul_(torch.where(active, beta2, 1.0).to(dtype)[:, None])
    exp_avg_sq.addcmul_(grad, grad, value=1 - beta2)
    denom = exp_avg_sq.sqrt().div_(bias2_sqrt.to(dtype)[:, None]).add_(eps)
    flat.addcdiv_(exp_avg * step_size.to(dtype)[:, None], denom)
