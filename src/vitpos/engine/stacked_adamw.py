"""AdamW over one flat (members × parameters) buffer: every member its own learning rate, step count and stop.

The parameters of S members live in one (S, P) tensor (:class:`~.stacked_step.Stack`), the tensors
AdamW decays in its first columns; the moments are two more (S, P) tensors. Each member is one AdamW
with its own learning rate (the learning-rate trials of a study train in one stack) and its own step
count, and a stopped member's parameters and moments stay exactly as they were (its decay factor,
first-moment weight, second-moment decay and step size become 1, 0, 1 and 0, and its gradient 0, NaN
included).

The per-member scalars of every step (:data:`COEFFICIENTS`) are computed once, for the whole run, from
its learning-rate schedule (:meth:`StackedAdamW.plan`), and a stop rewrites the stopped member's
column. So one step is the ten operations of :func:`adamw_` over the whole buffer, whatever the member
count, and nothing waits for the device.

The arithmetic is that of :func:`torch.optim.adamw` without ``foreach`` (the per-parameter loop
PyTorch runs on a CPU): the per-member scalars are computed in float64 and cast to the parameters'
dtype where PyTorch casts its Python scalars, so on a CPU a member's parameters are bit for bit those
of ``torch.optim.AdamW`` (``tests/engine/test_stacked_adamw.py`` checks it in float32).
"""

from __future__ import annotations

import torch

__all__ = ["COEFFICIENTS", "StackedAdamW", "adamw_"]

COEFFICIENTS = ("decay", "first_moment_weight", "second_moment_decay", "bias2_sqrt", "step_size")
"""The per-member scalars of one step, in the order of :meth:`StackedAdamW.plan`'s second axis."""
FROZEN = (1.0, 0.0, 1.0, 1.0, 0.0)
"""A stopped member's scalars: nothing it holds changes."""


class StackedAdamW:
    """AdamW on a flat (S, P) parameter buffer with per-member learning rates and stops.

    Columns ``[0, decayed)`` are decayed by ``weight_decay``; the others (norm scales, biases, the
    names a model exempts) are not. :meth:`plan` the learning rates of the steps to come, then
    :meth:`step` takes them in turn.
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
        self.active = torch.ones(flat.shape[0], dtype=torch.bool, device=flat.device)
        """Members that still train; the others' parameters and moments are frozen."""
        self.taken = 0
        """Steps taken so far (by every member still active)."""
        self.stopped_at: dict[int, int] = {}
        """Stopped member -> the steps it took."""
        self.schedule = torch.empty(0, len(COEFFICIENTS), flat.shape[0], dtype=flat.dtype, device=flat.device)
        """The planned steps' per-member scalars (steps, :data:`COEFFICIENTS`, S); row ``k``: step ``k + 1``."""

    @property
    def members(self) -> int:
        return int(self.flat.shape[0])

    @property
    def steps(self) -> torch.Tensor:
        """Optimiser steps each member has taken (a stopped member's count stops with it), float64."""
        counts = [self.stopped_at.get(i, self.taken) for i in range(self.members)]
        return torch.tensor(counts, dtype=torch.float64)

    def plan(self, rates: torch.Tensor) -> None:
        """Plan the next ``len(rates)`` steps at the learning rates ``rates`` (steps, S), float64: every
        member's scalars computed at once, as :func:`torch.optim.adamw`'s single-tensor loop computes its
        Python (double) scalars, then cast to the parameters' dtype where it casts them."""
        if rates.shape[1:] != (self.members,):
            raise ValueError(
                f"StackedAdamW.plan: needs rates of shape (steps, {self.members}), got {tuple(rates.shape)}"
            )
        _, weight_decay, (beta1, beta2), _ = self.settings
        lr = rates.to(self.flat.device, torch.float64)
        steps = torch.arange(len(lr), dtype=torch.float64, device=lr.device)[:, None] + (len(self.schedule) + 1)
        scalars = torch.stack(
            [
                1 - lr * weight_decay,
                torch.full_like(lr, 1 - beta1),
                torch.full_like(lr, beta2),
                ((1 - beta2**steps) ** 0.5).expand_as(lr),
                -(lr / (1 - beta1**steps)),
            ],
            dim=1,
        ).to(self.flat.dtype)
        self.schedule = torch.cat([self.schedule, scalars])
        if self.stopped_at:
            self._freeze(list(self.stopped_at))

    def stop(self, *members: int) -> None:
        """Freeze ``members``: from the next step on their parameters and moments no longer change."""
        new = [m for m in dict.fromkeys(members) if m not in self.stopped_at]
        if new:
            self.active[new] = False
            self.stopped_at |= dict.fromkeys(new, self.taken)
            self._freeze(new)

    def _freeze(self, members: list[int]) -> None:
        frozen = torch.tensor(FROZEN, dtype=self.schedule.dtype).to(self.schedule.device)
        self.schedule[:, :, members] = frozen[:, None]

    @torch.no_grad()
    def step(self, grad: torch.Tensor) -> None:
        """One AdamW step of every active member with gradient ``grad`` (S, P), at its planned rate."""
        adamw_(self.flat, grad, self.exp_avg, self.exp_avg_sq, self.active, self.take(), self.settings)

    def take(self) -> torch.Tensor:
        """The per-member scalars of the next step (:data:`COEFFICIENTS`, S; a view of the plan), counted
        as taken (a compiled step applies them in its graph)."""
        if self.taken >= len(self.schedule):
            raise ValueError(
                f"StackedAdamW: {self.taken} steps taken and {len(self.schedule)} planned; plan(rates) the steps "
                "to come before taking them"
            )
        self.taken += 1
        return self.schedule[self.taken - 1]

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
    active: torch.Tensor,
    scalars: torch.Tensor,
    settings: tuple[int, float, tuple[float, float], float],
) -> None:
    """The step of :class:`StackedAdamW` on its tensors, in place, with this step's per-member ``scalars``
    (:data:`COEFFICIENTS`, S) (a function of tensors, for a compiled step)."""
    decayed, weight_decay, (_, beta2), eps = settings
    decay, weight, second, bias2_sqrt, step_size = (c[:, None] for c in scalars)
    grad = torch.where(active[:, None], grad, 0)
    if weight_decay and decayed:
        flat[:, :decayed].mul_(decay)
    exp_avg.lerp_(grad, weight)
    exp_avg_sq.mul_(second)
    exp_avg_sq.addcmul_(grad, grad, value=1 - beta2)
    denom = exp_avg_sq.sqrt().div_(bias2_sqrt).add_(eps)
    flat.addcdiv_(exp_avg * step_size, denom)
