"""A synthetic detection task from the red-green generator: coloured squares on black, find each.

Every image holds 1 to ``objects`` squares (uniformly many) of random side (``min_size`` to
``max_size`` pixels), random position and random colour (red, green, blue or yellow: the four
classes), never overlapping, on a black background. Images vary in size and aspect ratio: each
one's height and width are drawn independently and uniformly between ``(1 - vary)`` times the
task's size and the task's size, so batches are padded (:mod:`.padded`) and every slot meets a
padding mask (``vary=0``: every image at the task's size). The targets are the squares' classes and
boxes (cx, cy, w, h normalised by the image's own size), padded to ``objects`` rows
(:mod:`vitpos.data.objects`). Like the red-green tasks, every split is a pure function of the
fields and can be drawn around any image size (squares keep their pixel sizes), so a model
trained at one size is evaluated at others.
Spec: ``synthetic:detect[:img=32|HxW][:vary=0.25][:objects=3][:min=4][:max=10][:train=800][:val=100]``
``[:test=200][:seed=0]``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import ConfigError
from ..validation import bounded, check_fields
from .dataset import DataInfo, DataSplits, Size, as_size
from .dense_transforms import DenseSample
from .padded import PaddedImages

__all__ = ["SyntheticDetection", "DETECT_COLOURS"]

DETECT_COLOURS = {"red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255), "yellow": (255, 255, 0)}
"""The classes, in label order, and their colours."""
_SPLIT_STREAM = {"train": 10, "val": 11, "test": 12}


@dataclass(frozen=True)
class SyntheticDetection:
    """The task; every split is a pure function of these fields."""

    img_size: int | tuple[int, int] = bounded(32, ge=1)
    """The largest image size (H, W); the images are drawn up to it."""
    vary: float = bounded(0.25, ge=0, lt=1)
    """How much smaller than ``img_size`` an image may be, as a fraction of each side."""
    objects: int = bounded(3, ge=1)
    """The most squares in one image (each image holds 1 to ``objects``)."""
    min_size: int = bounded(4, ge=1)
    """Smallest square side in pixels."""
    max_size: int = bounded(10, ge=1)
    """Largest square side in pixels."""
    train: int = bounded(800, ge=1)
    val: int = bounded(100, ge=1)
    test: int = bounded(200, ge=1)
    seed: int = bounded(0, ge=0)

    def __post_init__(self) -> None:
        check_fields(self)
        if self.min_size > self.max_size:
            raise ConfigError(f"min={self.min_size} is larger than max={self.max_size}; give min <= max")
        h, w = self.smallest
        if min(h, w) < 2 * self.max_size:
            raise ConfigError(
                f"a {h}x{w} image is too small for squares of up to {self.max_size} pixels; use a larger img "
                f"(its smallest images are (1 - vary) = {1 - self.vary:g} of it) or a smaller vary"
            )

    @property
    def smallest(self) -> Size:
        """The smallest image size drawn: ``(1 - vary)`` of each side, rounded up."""
        h, w = (math.ceil((1 - self.vary) * side - 1e-9) for side in as_size(self.img_size))
        return (h, w)

    @property
    def spec(self) -> str:
        """The data spec that opens exactly this task (the options that are not the default)."""
        h, w = as_size(self.img_size)
        parts = ["synthetic:detect"]
        if (h, w) != (32, 32):
            parts.append(f"img={h}" if h == w else f"img={h}x{w}")
        defaults, names = SyntheticDetection(), {"min_size": "min", "max_size": "max"}
        fields = ("vary", "objects", "min_size", "max_size", "train", "val", "test", "seed")
        parts += [f"{names.get(k, k)}={getattr(self, k)}" for k in fields if getattr(self, k) != getattr(defaults, k)]
        return ":".join(parts)

    @property
    def info(self) -> DataInfo:
        return DataInfo(self.spec, "detection", classes=tuple(DETECT_COLOURS), position_sensitive=True)

    def splits(self) -> DataSplits:
        """Train, val and test splits at the task's image size."""
        return DataSplits(*(self.render(name) for name in ("train", "val", "test")))

    def render(self, split: str, img_size: int | tuple[int, int] | None = None) -> PaddedImages:
        """Draw ``split`` around ``img_size`` (default: the task's); other sizes are drawn anew (:meth:`at_size`)."""
        size = as_size(self.img_size if img_size is None else img_size)
        task = dataclasses.replace(self, img_size=size)  # validates the new size
        rng = np.random.default_rng([self.seed, _SPLIT_STREAM[split]])
        (low_h, low_w), samples = task.smallest, []
        for _ in range(getattr(self, split)):
            image_hw = (
                (int(rng.integers(low_h, size[0] + 1)), int(rng.integers(low_w, size[1] + 1))) if self.vary else size
            )
            samples.append(task._draw(rng, torch.zeros(3, *image_hw, dtype=torch.uint8)))
        return PaddedImages(
            samples.__getitem__,
            [s.size for s in samples],
            self.info,
            size,
            slots=self.objects,
            resized=lambda other: self.render(split, other),
        )

    def _draw(self, rng: np.random.Generator, image: torch.Tensor) -> DenseSample:
        """Paint one image's squares in place; the image with its objects."""
        h, w = image.shape[-2:]
        boxes: list[tuple[int, int, int, int]] = []
        labels: list[int] = []
        colours = list(DETECT_COLOURS.values())
        wanted = int(rng.integers(1, self.objects + 1))
        for _ in range(100 * wanted):
            if len(boxes) == wanted:
                break
            side = int(rng.integers(self.min_size, self.max_size + 1))
            x, y = int(rng.integers(0, w - side + 1)), int(rng.integers(0, h - side + 1))
            if any(x < bx + bs and bx < x + side and y < by + bs and by < y + side for bx, by, bs, _ in boxes):
                continue
            label = int(rng.integers(len(colours)))
            image[:, y : y + side, x : x + side] = torch.tensor(colours[label], dtype=torch.uint8)[:, None, None]
            boxes.append((x, y, side, label))
            labels.append(label)
        corners = torch.tensor([[x, y, x + s, y + s] for x, y, s, _ in boxes], dtype=torch.float32).reshape(-1, 4)
        return DenseSample(image, torch.tensor(labels, dtype=torch.int64), corners)
