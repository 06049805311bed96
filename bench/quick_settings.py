"""What ``python -m bench.gpu --quick`` runs: device, model, sizes, parts and time budget."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from .gpu.check_layers import CheckShape

MODEL = "deit_small_patch16_224"


@dataclass(frozen=True)
class QuickSettings:
    """What the quick check runs: on which device, which model at which sizes, for how long."""

    device: torch.device
    model: str = MODEL
    model_args: dict[str, Any] = field(default_factory=dict)
    """Overrides of the model's preset (e.g. depth=1 for a test)."""
    tokens: tuple[int, ...] = (196, 784)
    batch: int = 256
    """Images per step at up to 196 tokens (scaled by 196 / tokens above)."""
    repeats: int = 3
    iters: int = 2
    compiled: bool = True
    check: CheckShape = field(default_factory=CheckShape)
    cases: tuple[str, ...] = ()
    """Labels of the correctness cases to run (:func:`bench.gpu.check_layers.check_cases`); empty: all."""
    budget_s: float = 240.0
    parts: tuple[str, ...] = ()
    """The parts to run (names in :data:`bench.gpu.quick.SHARES`); empty: all."""
    ensemble_members: str = "1,10,30,all"
    """Part (vii)'s stack sizes (:mod:`bench.quick_ensemble`)."""
