"""AdamW over stacked parameters: every member its own learning rate, step count and stop.

The parameters of S members are stacked on a leading axis (:class:`~.stacked_step.Stack`); each
member is one AdamW with its own learning rate (the learning-rate trials of a study train in one
stack) and its own step count, and a stopped member's parameters and moments stay exactly as they
were (its learning rate, first-moment weight and second-moment decay become 0, 0 and 1, and its
gradient 0). The arithmetic is that of :func:`torch.optim.adamw` without ``foreach`` (the
per-parameter loop PyTorch runs on a CPU): the per-member scalars are computed in float64 and cast to
the parameters' dtype where PyTorch casts its Python scalars, so on a CPU a member's parameters are
bit for bit those of ``torch.optim.AdamW`` (``tests/engine/test_stacked_adamw.py`` checks it in
float32). The update is written with multi-tensor (``torch._foreach_*``) operations and holds no
Python branch on tensor values, so ``torch.compile`` traces it into a few fused kernels.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["StackedAdamW"]


class StackedAdamW:
    """AdamW on stacked tensors (member axis first), with per-member learning rates and stops.

    ``params`` are leaves whose ``.grad`` the caller fills; ``weight_decay`` is one value per tensor
    (0 for the tensors exempt from decay, as :func:`~.optim.decays` says).
    """

    def __init__(
        self,
        params: Sequence[torch.Tensor],
        weight_decay: Sequence[float],
        members: int,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        if len(weight_decay) != len(params):
            raise ValueError(f"StackedAdamW: {len(weight_decay)} weight decays for {len(params)} tensors")
        bad = [tuple(p.shape) for p in params if p.ndim == 0 or p.shape[0] != members]
        if bad:
            raise ValueError(f"StackedAdamW: every tensor needs its {members} members on axis 0, got shapes {bad}")
        self.params = list(params)
        self.weight_decay = list(weight_decay)
        self.betas, self.eps = betas, eps
        device = self.params[0].device
        self._decay = torch.tensor(self.weight_decay, dtype=torch.float64, device=device)
        self.exp_avg = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
        self.steps = torch.zeros(members, dtype=torch.float64, device=device)
        """Optimiser steps each member has taken (a stopped member's count stops with it)."""
        self.active = torch.ones(members, dtype=torch.bool, device=device)
        """Members that still train; the others' parameters and moments are frozen."""

    @property
    def members(self) -> int:
        return int(self.steps.shape[0])

    def stop(self, member: int) -> None:
        """Freeze ``member``: from the next step on its parameters and moments no longer change."""
        self.active[member] = False

    @torch.no_grad()
    def step(self, lr: torch.Tensor, masked: bool = True) -> None:
        """One AdamW step of every active member at its learning rate ``lr`` (S, float64).

        ``masked`` off skips zeroing the stopped members' gradients (a caller that knows every member
        is active saves the operations; the arithmetic of an active member is the same either way).
        """
        beta1, beta2 = self.betas
        active = self.active.to(torch.float64)
        self.steps += active
        lr = lr.to(torch.float64) * active
        # as torch.optim.adamw's single-tensor loop computes its Python (double) scalars
        step_size = -(lr / (1 - beta1**self.steps))
        bias2_sqrt = (1 - beta2**self.steps) ** 0.5
        if any(p.grad is None for p in self.params):
            raise RuntimeError("StackedAdamW.step: a stacked tensor has no gradient; run the backward pass first")
        grads: list[torch.Tensor] = [p.grad for p in self.params]  # type: ignore[misc]
        if masked:
            grads = [torch.where(m, g, 0) for m, g in zip(self._views(self.active), grads, strict=True)]
        decayed = [i for i, wd in enumerate(self.weight_decay) if wd]
        if decayed:
            factors = self._views(1 - lr * self._decay[:, None])
            torch._foreach_mul_([self.params[i] for i in decayed], [factors[i] for i in decayed])
        second = torch.where(self.active, torch.full_like(active, beta2), torch.ones_like(active))
        torch._foreach_lerp_(self.exp_avg, grads, self._views((1 - beta1) * active))
        torch._foreach_mul_(self.exp_avg_sq, self._views(second))
        torch._foreach_addcmul_(self.exp_avg_sq, grads, grads, value=1 - beta2)
        denom = torch._foreach_div(torch._foreach_sqrt(self.exp_avg_sq), self._views(bias2_sqrt))
        torch._foreach_add_(denom, self.eps)
        torch._foreach_addcdiv_(self.params, torch._foreach_mul(self.exp_avg, self._views(step_size)), denom)

    def _views(self, values: torch.Tensor) -> list[torch.Tensor]:
        """Per tensor: ``values`` (S, or one row of S per tensor) in its dtype, shaped to broadcast over it."""
        rows = values if values.ndim == 2 else values.expand(len(self.params), -1)
        return [
            (row if row.dtype == torch.bool else row.to(p.dtype)).view(-1, *([1] * (p.ndim - 1)))
            for row, p in zip(rows, self.params, strict=True)
        ]

    def state_of(self, member: int) -> dict[str, list[torch.Tensor]]:
        """Copies of ``member``'s parameters and moments, and its step count (for tests and checks)."""
        return {
            "params": [p[member].detach().clone() for p in self.params],
            "exp_avg": [m[member].clone() for m in self.exp_avg],
            "exp_avg_sq": [v[member].clone() for v in self.exp_avg_sq],
            "steps": [self.steps[member].clone()],
        }
