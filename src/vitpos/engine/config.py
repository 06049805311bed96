"""The training configuration: a typed dataclass whose field docstrings become ``--help``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..validation import Allowed, bounded, check_fields
from .board import LOGS, tensorboard_missing

__all__ = ["TrainConfig", "DEVICES"]

DEVICES = Allowed(pattern=r"auto|cpu|mps|cuda(:\d+)?", choices=("auto", "cpu", "cuda", "cuda:N", "mps"))
"""The device names every command accepts."""


@dataclass
class TrainConfig:
    """Everything about a training run except the model."""

    data: str = "synthetic:direction"
    """Data set: synthetic:TASK[:opt=val...], folder:PATH, wds:PATTERN (tar shards), masks:PATH (segmentation),
    cifar10:PATH, cifar100:PATH or digits."""
    epochs: int = bounded(30, ge=1)
    """Passes over the training split."""
    batch_size: int = bounded(128, ge=1)
    """Global batch size, split evenly over the processes of a distributed run."""
    lr: float = bounded(1e-3, ge=0)
    """Peak learning rate, reached at the end of warm-up (scaled with the batch size only when lr_batch is set)."""
    lr_batch: int | None = bounded(None, ge=1)
    """The global batch size lr is stated for: the peak rate is lr * batch_size / lr_batch (DeiT: 512);
    none = lr as given."""
    min_lr: float = bounded(1e-5, ge=0)
    """Learning rate at the end of the cosine decay (at most lr)."""
    warmup_epochs: float = bounded(1.0, ge=0)
    """Linear warm-up from zero, in epochs (fractions allowed)."""
    cooldown_epochs: int = bounded(0, ge=0)
    """The last epochs of the run stay at min_lr after the cosine has decayed (timm's cool-down)."""
    weight_decay: float = bounded(0.05, ge=0)
    """AdamW's decoupled weight decay; norms, biases, prefix tokens and position parameters get none."""
    betas: tuple[float, float] = bounded((0.9, 0.999), ge=0, lt=1)
    """AdamW's moment decay rates."""
    grad_clip: float = bounded(1.0, ge=0)
    """Clip the global gradient norm to this value; 0 turns clipping off."""
    ema_decay: float = bounded(0.0, ge=0, lt=1)
    """Keep an exponential moving average of the weights with this decay (e.g. 0.9998); 0 = off."""
    label_smoothing: float = bounded(0.0, ge=0, lt=1)
    """Spread this much target mass uniformly over all classes."""
    mixup: float = bounded(0.0, ge=0)
    """Mixup Beta(alpha, alpha) parameter; 0 = off. Classification only."""
    cutmix: float = bounded(0.0, ge=0)
    """CutMix Beta(alpha, alpha) parameter; 0 = off. With mixup too, one is picked per batch."""
    hflip: float | None = bounded(None, ge=0, le=1)
    """Horizontal-flip probability; default 0.5 for folders and CIFAR, 0 elsewhere."""
    crop_scale: float | None = bounded(None, gt=0, le=1)
    """Smallest area fraction of the random resized crop of the whole image; default 0.08 for photographs
    (folders, shards, CIFAR), no crop elsewhere."""
    interpolation: str = bounded("bicubic", choices=("bicubic", "bilinear"))
    """How crops and resizes of photographs are resampled (Pillow's, antialiased)."""
    randaugment: str | None = None
    """RandAugment on the training device in timm's notation, e.g. rand-m9-mstd0.5-inc1 (DeiT); none = off."""
    random_erasing: float = bounded(0.0, ge=0, le=1)
    """Probability of erasing a random box of each image with per-pixel normal noise (Zhong et al. 2020)."""
    mixup_switch: float = bounded(0.5, ge=0, le=1)
    """With mixup and cutmix both on: the probability that a batch gets cutmix rather than mixup."""
    repeated_aug: int = bounded(1, ge=1)
    """Repeated augmentation: each image this many times per epoch, differently augmented, the copies on
    different processes; the epoch keeps the length of one pass (DeiT: 3)."""
    shuffle_buffer: int = bounded(1000, ge=1)
    """Samples each loading worker holds to shuffle WebDataset shards (wds:) as it streams them."""
    eval_crop: float = bounded(0.875, gt=0, le=1)
    """Evaluation of photographs read from files: resize the shorter side to size / eval_crop, then
    centre-crop to size (DeiT: 0.875, i.e. 256 -> 224)."""
    amp: bool = True
    """Mixed precision: autocast in amp_dtype on CUDA (on CPU only with cpu_amp)."""
    amp_dtype: str = bounded("bfloat16", choices=("bfloat16", "float16"))
    """The autocast dtype: bfloat16, or float16 (with a gradient scaler on CUDA)."""
    cpu_amp: bool = False
    """Autocast on CPU too (with amp); off by default, as CPUs without bf16 units run it slower."""
    compile: bool = False
    """Compile the training forward with torch.compile."""
    seed: int = bounded(0, ge=0, le=2**32 - 1)
    """Seeds model initialisation, data order, augmentation and dropout; below 2**32 (the per-step seeds
    derived from it must fit in 64 bits)."""
    init_pe: str | None = None
    """Start the absolute position encoding from a file saved by `vitpos pretrain-pe` (same encoding and width)."""
    init: str | None = None
    """Start from these weights: a `vitpos convert` folder, a run or checkpoint folder, a released
    checkpoint (timm/DeiT, iRPE, LaPE, Swin, PVT v1), its URL, or a preset with released weights (its file,
    downloaded once into the weights cache); a classifier of another class count is re-initialised;
    a segmenter loads a classifier's weights into its host."""
    init_drop: tuple[str, ...] = bounded((), min_items=0)
    """Parameters (names, prefixes or patterns such as '*.relative.*' or 'pos_embed,absolute.*') that
    --init leaves at their initialisation, e.g. to change the position encoding of a released model."""
    teacher: str | None = None
    """Hard distillation (DeiT) of a distilled student (distilled=True) from this teacher: a checkpoint
    (a run, checkpoint or released file) or a preset with released weights; classification only."""
    deterministic: bool = False
    """Use only deterministic kernels (slower on GPU); CPU runs are reproducible either way."""
    device: str = bounded("auto", pattern=DEVICES.pattern, choices=DEVICES.choices)
    """cpu, cuda, cuda:N or auto (the local GPU of this process if there is one, else CPU)."""
    workers: int = bounded(0, ge=0)
    """Data-loading worker processes per training process (0 = load in the main process)."""
    run_dir: str | None = None
    """Folder for the config, metrics and checkpoints; none = keep nothing on disk."""
    save_every: int = bounded(0, ge=0)
    """Also checkpoint every N optimiser steps inside an epoch; 0 = only at the end of each epoch."""
    keep_checkpoints: int = bounded(1, ge=1)
    """How many of the newest checkpoints to keep."""
    eval_every: int = bounded(1, ge=1)
    """Evaluate on the validation split every N epochs (and always after the last)."""
    progress: bool = True
    """Show progress bars and per-epoch summaries."""
    log: str = bounded("csv", choices=LOGS)
    """Where the per-epoch metrics go besides metrics.csv and metrics.jsonl: csv (nowhere else) or
    tensorboard (RUN/tensorboard/, needs the tensorboard package)."""

    def __post_init__(self) -> None:
        if isinstance(self.init_drop, str):
            self.init_drop = (self.init_drop,)
        check_fields(self)
        if self.init_drop and not self.init:
            raise ConfigError(
                f"TrainConfig.init_drop = {','.join(self.init_drop)} needs init (the weights to start from): "
                "set init or leave init_drop empty"
            )
        if self.log == "tensorboard" and tensorboard_missing():
            raise ConfigError(
                "TrainConfig.log = tensorboard needs the tensorboard package: pip install tensorboard "
                "(or keep the default log, csv: metrics.csv and metrics.jsonl)"
            )
        if self.min_lr > self.lr:
            raise ConfigError(
                f"TrainConfig.min_lr = {self.min_lr} is above lr = {self.lr}: the cosine schedule decays from lr "
                "down to min_lr; set min_lr <= lr"
            )
        if self.randaugment is not None:
            from ..data.randaugment import RandAugment  # kornia: imported only when asked for

            try:
                RandAugment.from_spec(self.randaugment)
            except ValueError as err:
                raise ConfigError(f"TrainConfig.randaugment: {err}") from None
        if self.cooldown_epochs >= self.epochs:
            raise ConfigError(
                f"TrainConfig.cooldown_epochs = {self.cooldown_epochs} leaves no epoch of the {self.epochs} for the "
                "warm-up and cosine; set cooldown_epochs below epochs"
            )

    @property
    def peak_lr(self) -> float:
        """The learning rate at the end of warm-up: lr, scaled linearly to batch_size when lr_batch is set."""
        return self.lr * self.batch_size / self.lr_batch if self.lr_batch else self.lr

    def replace(self, **overrides: Any) -> TrainConfig:
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
        out["init_drop"] = list(self.init_drop)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Inverse of :meth:`to_dict`; unknown keys are an error."""
        if not isinstance(data, dict):
            raise ConfigError(f"a TrainConfig is read from a mapping of its fields, got {type(data).__name__}")
        unknown = sorted(set(data) - set(cls.field_names()))
        if unknown:
            raise ConfigError(f"unknown training option(s) {', '.join(unknown)}; valid: {', '.join(cls.field_names())}")
        return cls(**data)
