"""The data config of a model: what a deployment must do to an image before the model sees it.

As timm's ``pretrained_cfg``: the input size, the per-channel mean and std, how a photograph is
resized and cropped (shorter side to ``size / crop_pct``, bicubic or bilinear, then the centre) and
the names of the outputs (class names, or regression targets). A run folder's checkpoints carry it
in their metadata (derived from the data and training configs stored there) and ``vitpos train``
writes it to ``RUN/data_config.yaml``; ``vitpos convert`` and ``vitpos export`` write it;
``vitpos eval``, :func:`vitpos.deploy.load_deployed` and :meth:`DataConfig.preprocess` read it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
from PIL import Image

from ..data.crops import EvalCrop
from ..data.folders import IMAGENET_MEAN, IMAGENET_STD
from ..data.transforms import normalize
from ..errors import CheckpointError

__all__ = ["DATA_CONFIG_FILE", "IMAGENET_MEAN", "IMAGENET_STD", "DataConfig"]

DATA_CONFIG_FILE = "data_config.yaml"
"""Beside a run's ``config.yaml``, written when ``vitpos train`` finishes: the data config for any reader."""

INTERPOLATIONS = ("bicubic", "bilinear")


@dataclass(frozen=True)
class DataConfig:
    """How images are prepared for a model, and what its outputs are called."""

    input_size: tuple[int, int, int]
    """Channels, height and width of the images the model was trained on."""
    mean: tuple[float, ...]
    """Per-channel mean on the [0, 1] scale, subtracted first."""
    std: tuple[float, ...]
    """Per-channel standard deviation on the [0, 1] scale, divided by after the mean."""
    interpolation: str = "bicubic"
    crop_pct: float = 0.875
    """Resize the shorter side to size / crop_pct, then take the centre (DeiT: 256 -> 224)."""
    crop_mode: str = "center"
    task: str = "classification"
    label_names: tuple[str, ...] = ()
    """Class names in label order (classification), regression target names; empty when unknown."""

    def __post_init__(self) -> None:
        channels = self.input_size[0]
        if len(self.mean) != channels or len(self.std) != channels:
            raise ValueError(f"data config: mean and std need {channels} values each (one per input channel)")
        if self.interpolation not in INTERPOLATIONS:
            raise ValueError(f"data config: interpolation {self.interpolation!r} is not one of {INTERPOLATIONS}")
        if not 0 < self.crop_pct <= 1:
            raise ValueError(f"data config: crop_pct {self.crop_pct} must lie in (0, 1]")

    def to_dict(self) -> dict[str, Any]:
        """Plain lists and numbers, for JSON and YAML."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str) -> DataConfig:
        """Read :meth:`to_dict`'s mapping; an error naming ``where`` if a field is missing or wrong."""
        try:
            return cls(
                input_size=tuple(int(v) for v in data["input_size"]),  # type: ignore[arg-type]
                mean=tuple(float(v) for v in data["mean"]),
                std=tuple(float(v) for v in data["std"]),
                interpolation=str(data.get("interpolation", "bicubic")),
                crop_pct=float(data.get("crop_pct", 0.875)),
                crop_mode=str(data.get("crop_mode", "center")),
                task=str(data.get("task", "classification")),
                label_names=tuple(str(v) for v in data.get("label_names", ())),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise CheckpointError(f"{where}: the data config is invalid ({err}); write it again") from None

    @classmethod
    def of_run(
        cls, image_hw: tuple[int, int], data: dict[str, Any], train: dict[str, Any], channels: int = 3
    ) -> DataConfig:
        """A training run's data config, from the data set (``DataInfo`` as a dict) and training config it stored."""
        names = data.get("target_names") if data.get("task") == "regression" else data.get("classes")
        return cls(
            input_size=(int(data.get("channels", channels)), *image_hw),
            mean=tuple(data.get("mean", (0.0,) * channels)),
            std=tuple(data.get("std", (1.0,) * channels)),
            interpolation=train.get("interpolation", "bicubic"),
            crop_pct=float(train.get("eval_crop", 0.875)),
            task=data.get("task", "classification"),
            label_names=tuple(names or ()),
        )

    @property
    def image_hw(self) -> tuple[int, int]:
        """The trained image size (height, width)."""
        return self.input_size[1], self.input_size[2]

    def preprocess(self, image: Image.Image, size: tuple[int, int] | None = None) -> torch.Tensor:
        """One photograph as the model's input (C, H, W): resized, centre-cropped to ``size`` (default the
        trained size), scaled to [0, 1] and normalised, as ``vitpos eval`` prepares a photograph."""
        mode = "L" if self.input_size[0] == 1 else "RGB"
        pixels = EvalCrop(size or self.image_hw, mode, self.crop_pct, self.interpolation)(image)
        return normalize(pixels.float().div(255)[None], self.mean, self.std)[0]
