"""The data config of a model: what a deployment must do to an image before the model sees it.

As timm's ``pretrained_cfg``: the input size, the per-channel mean and std, how a photograph is
resized and cropped (shorter side to ``size / crop_pct``, bicubic or bilinear, then the centre; or,
for data evaluated uncropped, the whole image resized) and the names of the outputs (class names,
or regression targets): exactly what evaluation does, so a deployment computes what eval scored.
Every field is checked when a config is made, whether written or read (:meth:`DataConfig.__post_init__`),
and a config read from a file names the file and the field. A run folder's checkpoints carry it
in their metadata (derived from the data and training configs stored there) and ``vitpos train``
writes it to ``RUN/data_config.yaml``; ``vitpos convert`` and ``vitpos export`` write it;
``vitpos eval``, :func:`vitpos.deploy.load_deployed` and :meth:`DataConfig.preprocess` read it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch
from PIL import Image

from ..data.class_list import check_distinct_names
from ..data.crops import EvalCrop
from ..data.decode import to_mode, to_tensor
from ..data.folders import IMAGENET_MEAN, IMAGENET_STD
from ..data.transforms import normalize, resize, to_float
from ..errors import CheckpointError, VitposError, quote

__all__ = ["DATA_CONFIG_FILE", "IMAGENET_MEAN", "IMAGENET_STD", "DataConfig"]

DATA_CONFIG_FILE = "data_config.yaml"
"""Beside a run's ``config.yaml``, written when ``vitpos train`` finishes: the data config for any reader."""

INTERPOLATIONS = ("bicubic", "bilinear")
CROP_MODES = ("center", "squash")
"""``center``: the shorter side resized to size / crop_pct, then the centre (photographs read from files);
``squash``: the whole image resized to the size (bilinear, antialiased when shrinking), as evaluation feeds
data held as tensors (synthetic tasks, CIFAR, digits)."""
MAX_SIDE = 16384
"""The largest image side a data config may name."""


def _side(value: Any) -> bool:
    """Whether ``value`` can be an image side: a whole number in 1..:data:`MAX_SIDE`."""
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_SIDE


def _numbers(value: Any, name: str) -> tuple[float, ...]:
    """``value`` as numbers; a list of anything else (a string, a set, booleans) is refused naming ``name``."""
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
    ):
        raise ValueError(f"{name} must be a list of numbers, not {quote(value)}")
    return tuple(float(v) for v in value)


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
    """Resize the shorter side to size / crop_pct, then take the centre (DeiT: 256 -> 224); 1 with ``squash``."""
    crop_mode: str = "center"
    """How an image is brought to the input size (:data:`CROP_MODES`)."""
    task: str = "classification"
    label_names: tuple[str, ...] = ()
    """Class names in label order (classification), regression target names; empty when unknown."""

    def __post_init__(self) -> None:
        """The one check of every field, whether the config is written or read (errors name the field)."""
        for name in ("input_size", "mean", "std", "label_names"):  # lists as given in Python, kept as tuples
            if isinstance(getattr(self, name), list):
                object.__setattr__(self, name, tuple(getattr(self, name)))
        size = self.input_size
        if (
            not isinstance(size, tuple)
            or len(size) != 3
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in size)
        ):
            raise ValueError(f"input_size must be [channels, height, width], 3 whole numbers, not {quote(size)}")
        if size[0] < 1 or not all(_side(v) for v in size[1:]):
            raise ValueError(
                f"input_size {list(size)} is out of range: at least 1 channel, and height and width in 1..{MAX_SIDE}"
            )
        channels = size[0]
        if len(self.mean) != channels or len(self.std) != channels:
            raise ValueError(f"mean and std need {channels} values each (one per input channel)")
        if not all(math.isfinite(m) for m in self.mean):
            raise ValueError(f"mean {list(self.mean)} holds a value that is not a finite number")
        if not all(math.isfinite(v) and v > 0 for v in self.std):
            raise ValueError(f"std {list(self.std)} must hold finite numbers above 0 (the images are divided by it)")
        if self.interpolation not in INTERPOLATIONS:
            raise ValueError(f"interpolation {self.interpolation!r} is not one of {INTERPOLATIONS}")
        if not 0 < self.crop_pct <= 1:
            raise ValueError(f"crop_pct {self.crop_pct} must lie in (0, 1]")
        if self.crop_mode not in CROP_MODES:
            raise ValueError(f"crop_mode {self.crop_mode!r} is not one of {CROP_MODES}")
        if self.crop_mode == "squash" and self.crop_pct != 1:
            raise ValueError(f"crop_pct {self.crop_pct} with crop_mode 'squash', which crops nothing: set it to 1")
        names = self.label_names
        if not isinstance(names, tuple) or not all(isinstance(n, str) for n in names):
            raise ValueError(f"label_names must be a list of names, not {quote(names)}")
        check_distinct_names(names, "label_names", "name")

    def check_outputs(self, outputs: int, where: str) -> DataConfig:
        """This config, after checking that its ``label_names`` name the model's ``outputs`` (or are empty)."""
        if self.label_names and len(self.label_names) != outputs:
            raise CheckpointError(
                f"{where}: the data config names {len(self.label_names)} outputs in label_names, but the model has "
                f"{outputs}; give one name per output (or none)"
            )
        return self

    def to_dict(self) -> dict[str, Any]:
        """Plain lists and numbers, for JSON and YAML."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str) -> DataConfig:
        """Read :meth:`to_dict`'s mapping; an error naming ``where`` and the field if one is missing or wrong."""
        try:
            if not isinstance(data, dict):
                raise ValueError(f"it must be a mapping of fields, not {quote(data)}")
            names = data.get("label_names", [])
            if not isinstance(names, list):  # a string would be read as one name a letter, a set reordered
                raise ValueError(f"label_names must be a list of names, not {quote(names)}")
            texts = {k: data.get(k, d) for k, d in (("interpolation", "bicubic"), ("crop_mode", "center"))}
            texts["task"] = data.get("task", "classification")
            wrong = next((k for k, v in texts.items() if not isinstance(v, str)), None)
            if wrong is not None:
                raise ValueError(f"{wrong} must be a word, not {quote(texts[wrong])}")
            size = data["input_size"]
            return cls(
                input_size=tuple(size) if isinstance(size, list) else size,
                mean=_numbers(data["mean"], "mean"),
                std=_numbers(data["std"], "std"),
                crop_pct=_numbers([data.get("crop_pct", 0.875)], "crop_pct")[0],
                label_names=tuple(names),
                **texts,
            )
        except KeyError as err:
            raise CheckpointError(f"{where}: the data config lacks the field {err}; write it again") from None
        except (TypeError, ValueError) as err:
            raise CheckpointError(f"{where}: the data config is invalid: {err}; fix that field") from None

    @classmethod
    def of_run(
        cls, image_hw: tuple[int, int], data: dict[str, Any], train: dict[str, Any], channels: int = 3
    ) -> DataConfig:
        """A training run's data config, from the data set (``DataInfo`` as a dict) and training config it stored:
        what evaluation does to an image (:func:`vitpos.engine.pipeline.for_evaluation`)."""
        names = data.get("target_names") if data.get("task") == "regression" else data.get("classes")
        # runs written before DataInfo said so: folders and shards are the data sets read from files
        cropped = data.get("centre_cropped", str(data.get("spec", "")).startswith(("folder:", "wds:")))
        view = (
            {"interpolation": train.get("interpolation", "bicubic"), "crop_pct": float(train.get("eval_crop", 0.875))}
            if cropped
            else {"interpolation": "bilinear", "crop_pct": 1.0, "crop_mode": "squash"}
        )
        return cls(
            input_size=(int(data.get("channels", channels)), *image_hw),
            mean=tuple(data.get("mean", (0.0,) * channels)),
            std=tuple(data.get("std", (1.0,) * channels)),
            task=data.get("task", "classification"),
            label_names=tuple(names or ()),
            **view,
        )

    @property
    def image_hw(self) -> tuple[int, int]:
        """The trained image size (height, width)."""
        return self.input_size[1], self.input_size[2]

    def preprocess(self, image: Image.Image, size: tuple[int, int] | None = None) -> torch.Tensor:
        """One image as the model's input (C, H, W), prepared as evaluation prepares it: resized (and
        centre-cropped, with ``center``) to ``size`` (default the trained size), scaled to [0, 1] and normalised."""
        size = size or self.image_hw
        if not (isinstance(size, (tuple, list)) and len(size) == 2 and all(_side(v) for v in size)):
            raise VitposError(f"size {quote(size)} must be (height, width), each a whole number in 1..{MAX_SIDE}")
        mode = "L" if self.input_size[0] == 1 else "RGB"
        if self.crop_mode == "squash":
            pixels = resize(to_tensor(to_mode(image, mode))[None], size)
        else:
            pixels = EvalCrop(size, mode, self.crop_pct, self.interpolation)(image)[None]
        return normalize(to_float(pixels), self.mean, self.std)[0]
