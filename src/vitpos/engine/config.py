"""The training configuration: a typed dataclass whose field docstrings become ``--help``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

__all__ = ["TrainConfig"]


@dataclass
class TrainConfig:
    """Everything about a training run except the model."""

    data: str = "synthetic:direction"
    """Data set: synthetic:TASK[:opt=val...], folder:PATH, cifar10:PATH, cifar100:PATH or digits."""
    epochs: int = 30
    """Passes over the training split."""
    batch_size: int = 128
    """Global batch size, split evenly over the processes of a distributed run."""
    lr: float = 1e-3
    """Peak learning rate, reached at the end of warm-up (not scaled with the batch size)."""
    min_lr: float = 1e-5
    """Learning rate at the end of the cosine decay."""
    warmup_epochs: float = 1.0
    """Linear warm-up from zero, in epochs (fractions allowed)."""
    weight_decay: float = 0.05
    """AdamW's decoupled weight decay; norms, biases, prefix tokens and position parameters get none."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW's moment decay rates."""
    grad_clip: float = 1.0
    """Clip the global gradient norm to this value; 0 turns clipping off."""
    ema_decay: float = 0.0
    """Keep an exponential moving average of the weights with this decay (e.g. 0.9998); 0 = off."""
    label_smoothing: float = 0.0
    """Spread this much target mass uniformly over all classes."""
    mixup: float = 0.0
    """Mixup Beta(alpha, alpha) parameter; 0 = off. Classification only."""
    cutmix: float = 0.0
    """CutMix Beta(alpha, alpha) parameter; 0 = off. With mixup too, one is picked per batch."""
    hflip: float | None = None
    """Horizontal-flip probability; default 0.5 for folders and CIFAR, 0 elsewhere."""
    crop_scale: float | None = None
    """Smallest area fraction of the random resized crop; default 0.08 for folders and CIFAR, no crop elsewhere."""
    amp: bool = True
    """Mixed precision: autocast in amp_dtype on CUDA (on CPU only with cpu_amp)."""
    amp_dtype: str = "bfloat16"
    """The autocast dtype: bfloat16, or float16 (with a gradient scaler on CUDA)."""
    cpu_amp: bool = False
    """Autocast on CPU too (with amp); off by default, as CPUs without bf16 units run it slower."""
    compile: bool = False
    """Compile the training forward with torch.compile."""
    seed: int = 0
    """Seeds model initialisation, data order, augmentation and dropout."""
    init_pe: str | None = None
    """Start the absolute position encoding from a file saved by `vitpos pretrain-pe` (same encoding and width)."""
    deterministic: bool = False
    """Use only deterministic kernels (slower on GPU); CPU runs are reproducible either way."""
    device: str = "auto"
    """cpu, cuda, cuda:N or auto (the local GPU of this process if there is one, else CPU)."""
    workers: int = 0
    """Data-loading worker processes per training process (0 = load in the main process)."""
    run_dir: str | None = None
    """Folder for the config, metrics and checkpoints; none = keep nothing on disk."""
    save_every: int = 0
    """Also checkpoint every N optimiser steps inside an epoch; 0 = only at the end of each epoch."""
    keep_checkpoints: int = 1
    """How many of the newest checkpoints to keep."""
    eval_every: int = 1
    """Evaluate on the validation split every N epochs (and always after the last)."""
    progress: bool = True
    """Show progress bars and per-epoch summaries."""

    def __post_init__(self) -> None:
        if isinstance(self.betas, list):
            self.betas = tuple(self.betas)
        positive = ("epochs", "batch_size", "keep_checkpoints", "eval_every")
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        non_negative = ("lr", "min_lr", "warmup_epochs", "weight_decay", "grad_clip", "label_smoothing", "mixup", "cutmix", "workers", "save_every")
        for name in non_negative:
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not 0.0 <= self.ema_decay < 1.0:
            raise ValueError(f"ema_decay must be in [0, 1), got {self.ema_decay}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {self.label_smoothing}")
        if self.hflip is not None and not 0.0 <= self.hflip <= 1.0:
            raise ValueError(f"hflip is a probability, got {self.hflip}")
        if self.crop_scale is not None and not 0.0 < self.crop_scale <= 1.0:
            raise ValueError(f"crop_scale must be in (0, 1], got {self.crop_scale}")
        if self.amp_dtype not in ("bfloat16", "float16"):
            raise ValueError(f"amp_dtype must be bfloat16 or float16, got {self.amp_dtype!r}")
        if len(self.betas) != 2 or not all(0.0 <= b < 1.0 for b in self.betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas}")

    def replace(self, **overrides: Any) -> "TrainConfig":
        """A copy with fields replaced; unknown names are an error."""
        unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise TypeError(f"unknown training option(s) {', '.join(unknown)}; valid: {', '.join(self.field_names())}")
        return dataclasses.replace(self, **overrides)

    @classmethod
    def field_names(cls) -> list[str]:
        """Every option name."""
        return [f.name for f in dataclasses.fields(cls)]

    def to_dict(self) -> dict[str, Any]:
        """Plain dict, for YAML/JSON."""
        out = dataclasses.asdict(self)
        out["betas"] = list(self.betas)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TrainConfig":
        """Inverse of :meth:`to_dict`; unknown keys are an error."""
        return cls().replace(**data)
