"""AdamW with decay-free groups, a warm-up + cosine learning-rate schedule, and a weight EMA."""

from __future__ import annotations

import copy
import math
import warnings
from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["decays", "param_groups", "build_optimizer", "WarmupCosine", "ModelEma", "warn_long_warmup"]


def decays(model: nn.Module) -> dict[str, bool]:
    """Per trainable parameter name: whether AdamW decays it.

    Exempt: every parameter with fewer than two dimensions (norm scales, biases) and the names
    the model lists in ``no_weight_decay()`` (prefix tokens, position tables), as in DeiT.
    """
    no_weight_decay = getattr(model, "no_weight_decay", None)
    exempt_names = set(no_weight_decay()) if callable(no_weight_decay) else set()
    return {
        name: param.ndim > 1 and name not in exempt_names
        for name, param in model.named_parameters()
        if param.requires_grad
    }


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two AdamW groups: decayed weights, and everything exempt from decay (see :func:`decays`)."""
    mask = decays(model)
    params = dict(model.named_parameters())
    decay = [params[name] for name, on in mask.items() if on]
    exempt = [params[name] for name, on in mask.items() if not on]
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": exempt, "weight_decay": 0.0},
    ]


def build_optimizer(model: nn.Module, lr: float, weight_decay: float, betas: tuple[float, float]) -> torch.optim.AdamW:
    """AdamW over :func:`param_groups`."""
    return torch.optim.AdamW(param_groups(model, weight_decay), lr=lr, betas=betas)


@dataclass(frozen=True)
class WarmupCosine:
    """Linear warm-up from 0 to ``peak`` over ``warmup`` steps, then cosine decay to ``floor`` at ``total``.

    Stateless: the learning rate is a function of the step alone, so the step counter saved in a
    checkpoint is the whole scheduler state.
    """

    peak: float
    floor: float
    warmup: int
    total: int

    def __call__(self, step: int) -> float:
        """The learning rate for optimiser step ``step`` (counted from 0)."""
        if step < self.warmup:
            return self.peak * (step + 1) / self.warmup
        span = max(self.total - self.warmup, 1)
        progress = min((step - self.warmup) / span, 1.0)
        return self.floor + 0.5 * (self.peak - self.floor) * (1.0 + math.cos(math.pi * progress))

    def apply(self, optimizer: torch.optim.Optimizer, step: int) -> float:
        """Set every group's learning rate for ``step``; returns it."""
        lr = self(step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        return lr


def warn_long_warmup(schedule: WarmupCosine, total_steps: int, warmup_epochs: float, epochs: int) -> None:
    """Warn when the warm-up lasts the whole run (the learning rate never reaches its peak nor decays), or runs
    into the cool-down (it never decays along the cosine)."""
    if total_steps <= 0 or schedule.peak <= 0:
        return  # no steps, or a learning rate of 0 throughout
    if schedule.warmup >= total_steps:
        last = schedule(total_steps - 1)
        warnings.warn(
            f"warmup_epochs {warmup_epochs:g} is at least the run's {epochs} epoch(s): the learning rate rises "
            f"linearly for the whole run, reaching {last:.3g} at the last step ({100 * last / schedule.peak:.3g}% "
            f"of its peak {schedule.peak:.3g}), and never decays; set warmup_epochs below epochs (a recipe's "
            "warm-up is meant for its full schedule)",
            stacklevel=2,
        )
    elif schedule.warmup > schedule.total:
        _warn_overlap(schedule, total_steps, warmup_epochs, epochs)


def _warn_overlap(schedule: WarmupCosine, total_steps: int, warmup_epochs: float, epochs: int) -> None:
    """The warm-up ends inside the cool-down: say what the learning rate does step by step."""
    per_epoch = total_steps / epochs
    cooldown = (total_steps - schedule.total) / per_epoch
    tail = total_steps - schedule.warmup - 1
    end = (
        f"then drops at once to min_lr {schedule.floor:.3g} for the last {tail} step(s)"
        if tail
        else "then the run ends"
    )
    warnings.warn(
        f"warmup_epochs {warmup_epochs:g} runs into the cool-down (the last {cooldown:g} of {epochs} epochs, from "
        f"step {schedule.total + 1}): the learning rate rises linearly over the first {schedule.warmup} steps to its "
        f"peak {schedule.peak:.3g}, stays there one step, {end}; it never follows the cosine decay. Keep "
        "warmup_epochs + cooldown_epochs at most epochs",
        stacklevel=3,
    )


class ModelEma(nn.Module):
    """An exponential moving average of a model's parameters; buffers are copied as they are."""

    def __init__(self, model: nn.Module, decay: float) -> None:
        super().__init__()
        self.module = copy.deepcopy(model).eval()
        self.module.requires_grad_(False)
        self.decay = decay

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """ema <- decay * ema + (1 - decay) * model."""
        for ema_p, p in zip(self.module.parameters(), model.parameters(), strict=True):
            ema_p.lerp_(p.detach(), 1.0 - self.decay)
        for ema_b, b in zip(self.module.buffers(), model.buffers(), strict=True):
            ema_b.copy_(b)
