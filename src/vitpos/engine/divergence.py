"""Stop a run whose loss or weights stop being finite, before a non-finite checkpoint is written.

The loss of every step is watched on the device (no host synchronisation per step); the trainer
asks :meth:`DivergenceGuard.check` where it synchronises anyway (progress updates, the end of an
epoch, before each checkpoint), and :meth:`DivergenceGuard.check_weights` before it saves.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import nn

from ..errors import VitposError
from .config import TrainConfig
from .distributed import Dist

__all__ = ["TrainingDiverged", "DivergenceGuard"]


class TrainingDiverged(VitposError):
    """The training loss or the weights became NaN or infinite."""

    def __init__(self, message: str, step: int, loss: float) -> None:
        super().__init__(message)
        self.step, self.loss = step, loss


class DivergenceGuard:
    """Remembers the first optimiser step whose loss was not finite."""

    def __init__(self, cfg: TrainConfig, ctx: Dist, device: torch.device) -> None:
        self.cfg, self.ctx, self.device = cfg, ctx, device
        self._bad_step = torch.full((), -1, dtype=torch.long, device=device)  # -1: every loss so far finite
        self._bad_loss = torch.zeros((), dtype=torch.float32, device=device)

    def watch(self, loss: torch.Tensor, step: int) -> None:
        """Record ``loss`` of 1-based optimiser step ``step`` (kept on the device)."""
        first = torch.logical_and(~torch.isfinite(loss.detach()), self._bad_step < 0)
        self._bad_step = torch.where(first, step, self._bad_step)
        self._bad_loss = torch.where(first, loss.detach().float(), self._bad_loss)

    def check(self, step: int, last_checkpoint: Path | None) -> None:
        """Raise :class:`TrainingDiverged` if a watched loss was not finite (on any process) by ``step``."""
        flag = (self._bad_step >= 0).long().view(1)
        if self.ctx.enabled:  # every process stops together
            self.ctx.sum(flag)
        if not int(flag):
            return
        first = int(self._bad_step)
        if first < 0:
            raise self._error(
                f"another process's training loss was not finite by step {step}", step, math.nan, last_checkpoint
            )
        value = float(self._bad_loss)
        raise self._error(f"the training loss was {value:g} at step {first}", first, value, last_checkpoint)

    def check_weights(self, model: nn.Module, step: int, last_checkpoint: Path | None) -> None:
        """Raise :class:`TrainingDiverged` if a parameter of ``model`` holds a NaN or an infinity."""
        finite = torch.stack([torch.isfinite(p.detach()).all() for p in model.parameters()]).all()
        if not bool(finite):
            raise self._error(f"the weights became NaN or infinite by step {step}", step, math.nan, last_checkpoint)

    def _error(self, what: str, step: int, loss: float, last_checkpoint: Path | None) -> TrainingDiverged:
        cfg = self.cfg
        if last_checkpoint is not None:
            kept = f"the last finite checkpoint is kept: {last_checkpoint}"
        elif cfg.run_dir:
            kept = "no checkpoint was written before it diverged"
        else:
            kept = "nothing was saved (no run folder)"
        clip = f"tighten --grad-clip (now {cfg.grad_clip:g})" if cfg.grad_clip else "turn on --grad-clip (e.g. 1.0)"
        autocast = cfg.amp and (self.device.type == "cuda" or cfg.cpu_amp)
        precision = "or train in float32 (--no-amp)" if autocast else "or warm up longer (--warmup-epochs)"
        return TrainingDiverged(
            f"training diverged: {what}; the run stopped and {kept}. Lower --lr (now {cfg.lr:g}), {clip}, {precision}",
            step,
            loss,
        )
