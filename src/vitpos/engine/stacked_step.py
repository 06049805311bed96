"""The stacked models of an ensemble and their training step as one function.

:class:`Stack` holds S members' parameters stacked on a leading axis and runs them as one model
(:func:`torch.vmap` over :func:`torch.func.functional_call`; one member runs without vmap).
:class:`StackStep` is one optimiser step of every member: forward, each member's loss, backward,
per-member gradient clipping and :class:`~.stacked_adamw.StackedAdamW`. Eager, its arithmetic is
that of the stack trained step by step with ``torch.optim.AdamW``. With ``compile`` the step is
handed to :func:`torch.compile` once per stack (its shapes never change, so CUDA graphs apply with
``mode="reduce-overhead"``); ``tests/engine/test_stacked_step.py`` checks that the compiled step
equals the eager one member by member in float64. Compiling is opt-in: on CUDA it is measured by
``python -m bench.ensemble --rate --compile`` and ``python -m bench.gpu --quick`` (part
``ensemble``), and stays off by default until a GPU row shows it correct and faster.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn
from torch.func import functional_call

from ..compile_cache import compile_privately
from ..tasks import loss_precision
from .precision import Precision
from .stacked_adamw import StackedAdamW

__all__ = ["Stack", "StackStep", "COMPILE_MODES", "compile_mode"]

COMPILE_MODES = ("off", "default", "reduce-overhead", "max-autotune")
"""``off``: eager; the others: the :func:`torch.compile` mode of the step (``reduce-overhead``: CUDA graphs)."""

Losses = Callable[[torch.Tensor, Sequence[Any]], list[torch.Tensor]]
"""(stacked outputs, each member's targets) -> each member's loss."""


def compile_mode(value: bool | str) -> str:
    """``compile`` as a mode of :data:`COMPILE_MODES` (True: CUDA graphs on CUDA, ``default`` elsewhere is
    decided by the caller; False: off)."""
    if value is True:
        return "reduce-overhead"
    if value is False:
        return "off"
    if value not in COMPILE_MODES:
        raise ValueError(f"compile = {value!r}; expected one of {', '.join(COMPILE_MODES)} (or True/False)")
    return value


class Stack:
    """The members' modules and their parameters stacked on a leading axis."""

    def __init__(self, models: list[nn.Module]) -> None:
        self.models = models
        self.base = models[0]
        self.params = {
            name: nn.Parameter(torch.stack([dict(m.named_parameters())[name].detach() for m in models]))
            for name, _ in self.base.named_parameters()
        }  # Parameters: torch.compile treats their addresses as static (CUDA graphs need it)
        self.buffers = {
            name: torch.stack([dict(m.named_buffers())[name] for m in models]) for name, _ in self.base.named_buffers()
        }
        self._forward = self._alone if len(models) == 1 else torch.vmap(self._one, randomness="different")

    def __len__(self) -> int:
        return len(self.models)

    def _one(self, params: dict, buffers: dict, x: torch.Tensor) -> torch.Tensor:
        return functional_call(self.base, (params, buffers), (x,))

    def _alone(self, params: dict, buffers: dict, x: torch.Tensor) -> torch.Tensor:
        """One member: its model on its slice, no vmap (nothing to batch)."""
        first = {k: v[0] for k, v in params.items()}, {k: v[0] for k, v in buffers.items()}
        return functional_call(self.base, first, (x[0],))[None]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:  # S, B, C, H, W -> S, B, outputs
        return self._forward(self.params, self.buffers, x)

    def member(self, i: int) -> dict[str, torch.Tensor]:
        """A copy of member ``i``'s parameters."""
        return {name: p[i].detach().clone() for name, p in self.params.items()}

    @torch.no_grad()
    def restore(self, i: int, weights: dict[str, torch.Tensor]) -> None:
        """Put ``weights`` (from :meth:`member`) back as member ``i``'s parameters."""
        for name, value in weights.items():
            self.params[name][i].copy_(value)

    def train(self, mode: bool) -> None:
        self.base.train(mode)

    @torch.no_grad()
    def write_back(self) -> None:
        """Copy every member's slice of the stacked parameters into its own module."""
        for i, model in enumerate(self.models):
            for name, param in model.named_parameters():
                param.copy_(self.params[name][i])

    def clip_(self, max_norm: float) -> None:
        """Clip each member's gradient to global norm ``max_norm``, as ``clip_grad_norm_`` clips one model's."""
        grads = [p.grad for p in self.params.values() if p.grad is not None]
        if not grads:
            return
        norms = torch.stack([g.flatten(1).norm(2, dim=1) for g in grads], dim=1).norm(2, dim=1)  # S
        coef = (max_norm / (norms + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef.view(-1, *([1] * (g.ndim - 1))).to(g.dtype))


class StackStep:
    """One optimiser step of every member of ``stack``: forward, losses, backward, clipping, AdamW.

    ``decays`` names the trainable parameters and whether AdamW decays each (:func:`~.optim.decays`);
    ``losses`` gives each member's loss from the stacked outputs. ``compile`` (a mode of
    :data:`COMPILE_MODES`) compiles the step on its first call, with ``backend`` (tests use ``aot_eager``,
    which traces as Inductor does but runs the traced operations as they are).
    """

    def __init__(
        self,
        stack: Stack,
        decays: dict[str, bool],
        losses: Losses,
        *,
        weight_decay: float,
        betas: tuple[float, float],
        grad_clip: float = 0.0,
        precision: Precision | None = None,
        compile: bool | str = False,
        backend: str = "inductor",
    ) -> None:
        self.stack = stack
        self.losses = losses
        self.grad_clip = grad_clip
        self.precision = precision or Precision("cpu")
        names = list(decays)
        self.optimizer = StackedAdamW(
            [stack.params[n] for n in names], [weight_decay if decays[n] else 0.0 for n in names], len(stack), betas
        )
        self.mode = compile_mode(compile)
        if self.mode == "off":
            self._step = self._eager
        else:
            for t in (*self.optimizer.exp_avg, *self.optimizer.exp_avg_sq, self.optimizer.steps, self.optimizer.active):
                torch._dynamo.mark_static_address(t)  # updated in place: CUDA graphs keep them where they are
            self._step = compile_privately(
                self._eager, mode=None if self.mode == "default" else self.mode, backend=backend
            )

    @property
    def active(self) -> torch.Tensor:
        """The members that still train (bool, S)."""
        return self.optimizer.active

    def stop(self, member: int) -> None:
        """Freeze ``member``'s parameters and AdamW state from the next step on."""
        self.optimizer.stop(member)

    def __call__(self, x: torch.Tensor, targets: Sequence[Any], lr: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Train every active member one step on its batch (``x``: S, B, ...; ``targets``: one per member) at
        its learning rate ``lr`` (S, float64); returns the losses (S) and the outputs, both detached."""
        masked = self.mode != "off" or not bool(self.optimizer.active.all())  # compiled: one graph, always masked
        return self._step(x, list(targets), lr, masked)

    def _eager(
        self, x: torch.Tensor, targets: list[Any], lr: torch.Tensor, masked: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        with self.precision.autocast():
            outputs = self.stack(x)
        losses = torch.stack(self.losses(loss_precision(outputs), targets))
        for p in self.stack.params.values():
            p.grad = None
        losses.sum().backward()  # member i's gradient is that of its own loss alone
        if self.grad_clip:
            self.stack.clip_(self.grad_clip)
        self.optimizer.step(lr, masked=masked)
        return losses.detach(), outputs.detach()
