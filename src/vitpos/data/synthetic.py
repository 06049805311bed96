"""The red-green tasks of the thesis (Zhang 2022, §4 and §5.1), generated from a seed.

A black image holds one red and one green square of equal size at random, non-overlapping
places. The tasks ask for different location information:

``direction``            is the green square left (0) or right (1) of the red one? (§4.1)
``direction4``           left/right x above/below, four classes (the pretraining task of §5.1)
``distance``             regress the offset (dx, dy) from the green to the red square (§4.1, R²)
``absolute``             are both squares in the upper (0) or the lower (1) half? (§4.2)
``absolute_colorshift``  the same, but the test split paints the squares in colours never
                         seen in training (§4.3)

By default squares sit on the lattice of their own size, so with squares one patch wide each
square fills exactly one patch. Offsets are measured in square widths, so a label means the
same at every image size: :meth:`SyntheticTask.render` draws any task at any size, for
resolution-generalisation tests.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from ..errors import ConfigError
from ..validation import bounded, check_fields
from .dataset import DataInfo, DataSplits, Size, TensorImages, as_size

__all__ = ["TASKS", "SyntheticTask", "SyntheticImages", "TRAIN_COLOURS", "SHIFTED_COLOURS"]

TASKS = ("direction", "direction4", "distance", "absolute", "absolute_colorshift")

TRAIN_COLOURS = ((255, 0, 0), (0, 255, 0))
"""(red, green): the colours of the first and second square."""
SHIFTED_COLOURS = ((0, 0, 255), (255, 255, 0))
"""(blue, yellow): the test colours of ``absolute_colorshift``."""

_CLASSES = {
    "direction": ("green_left", "green_right"),
    "direction4": ("green_left_above", "green_right_above", "green_left_below", "green_right_below"),
    "absolute": ("both_upper", "both_lower"),
    "absolute_colorshift": ("both_upper", "both_lower"),
}
_SPLIT_STREAM = {"train": 0, "val": 1, "test": 2}


@dataclass(frozen=True)
class SyntheticTask:
    """One red-green task; every split is a pure function of these fields."""

    task: str = bounded("direction", choices=TASKS)
    img_size: int | tuple[int, int] = bounded(32, ge=1)
    square_size: int = bounded(4, ge=1)
    """Side of each square in pixels; one patch wide by default (the model's patch size)."""
    train: int = bounded(5000, ge=1)
    val: int = bounded(1000, ge=1)
    test: int = bounded(1000, ge=1)
    seed: int = bounded(0, ge=0)
    aligned: bool = True
    """Place squares on the lattice of their own size; False allows any pixel offset."""

    def __post_init__(self) -> None:
        check_fields(self)
        h, w = as_size(self.img_size)
        if min(h, w) < 2 * self.square_size:
            raise ConfigError(
                f"a {h}x{w} image has no room for two {self.square_size}-pixel squares; "
                "use a larger image or smaller squares"
            )

    @property
    def spec(self) -> str:
        """The data spec that opens exactly this task (every option that is not the default)."""
        h, w = as_size(self.img_size)
        parts = [f"synthetic:{self.task}"]
        if (h, w) != (32, 32):
            parts.append(f"img={h}" if h == w else f"img={h}x{w}")
        parts.append(f"square={self.square_size}")  # its default follows the model, so always spelled out
        defaults = SyntheticTask()
        parts += [
            f"{k}={getattr(self, k)}"
            for k in ("train", "val", "test", "seed")
            if getattr(self, k) != getattr(defaults, k)
        ]
        return ":".join(parts + ([] if self.aligned else ["free"]))

    @property
    def info(self) -> DataInfo:
        """Classes or targets of this task."""
        spec = self.spec
        if self.task == "distance":
            return DataInfo(spec, "regression", target_names=("dx", "dy"), position_sensitive=True)
        return DataInfo(spec, "classification", classes=_CLASSES[self.task], position_sensitive=True)

    def splits(self) -> DataSplits:
        """Train, val and test splits at the task's image size."""
        return DataSplits(*(self.render(name) for name in ("train", "val", "test")))

    def render(self, split: str, img_size: int | tuple[int, int] | None = None) -> SyntheticImages:
        """Draw ``split`` at ``img_size`` (default: the task's); squares keep their pixel size."""
        size = as_size(self.img_size if img_size is None else img_size)
        task = dataclasses.replace(self, img_size=size)  # validates the new size
        rng = np.random.default_rng([self.seed, _SPLIT_STREAM[split]])
        n = getattr(self, split)
        red, green = task._sample(rng, n, size)
        colours = SHIFTED_COLOURS if (self.task == "absolute_colorshift" and split == "test") else TRAIN_COLOURS
        images = _paint(size, self.square_size, [red, green], colours)
        return SyntheticImages(images, task._targets(red, green, size), self, split)

    def _sample(self, rng: np.random.Generator, n: int, size: Size) -> tuple[np.ndarray, np.ndarray]:
        """Top-left corners (n, 2) as (x, y) of the red and the green square, by rejection."""
        h, w = size
        s = self.square_size
        red, green = np.empty((0, 2), np.int64), np.empty((0, 2), np.int64)
        for _ in range(1000):
            if len(red) >= n:
                return red[:n], green[:n]
            r, g = self._corners(rng, 2 * n, h, w), self._corners(rng, 2 * n, h, w)
            keep = self._valid(r, g, h)
            red, green = np.concatenate([red, r[keep]]), np.concatenate([green, g[keep]])
        raise ValueError(
            f"{self.task} has (almost) no valid scenes at {h}x{w} with {s}-pixel squares; use a larger image"
        )

    def _corners(self, rng: np.random.Generator, n: int, h: int, w: int) -> np.ndarray:
        s = self.square_size
        if self.aligned:
            return np.stack([rng.integers(0, w // s, n), rng.integers(0, h // s, n)], axis=1) * s
        return np.stack([rng.integers(0, w - s + 1, n), rng.integers(0, h - s + 1, n)], axis=1)

    def _valid(self, red: np.ndarray, green: np.ndarray, height: int) -> np.ndarray:
        s = self.square_size
        dx, dy = green[:, 0] - red[:, 0], green[:, 1] - red[:, 1]
        ok = (np.abs(dx) >= s) | (np.abs(dy) >= s)  # no overlap
        if self.task in ("direction", "direction4"):
            ok &= dx != 0  # a left/right answer exists
        if self.task == "direction4":
            ok &= dy != 0
        if self.task.startswith("absolute"):
            ys = np.stack([red[:, 1], green[:, 1]], axis=1)
            upper = (ys + s <= height / 2).all(axis=1)
            lower = (ys >= height / 2).all(axis=1)
            ok &= upper | lower
        return ok

    def _targets(self, red: np.ndarray, green: np.ndarray, size: Size) -> torch.Tensor:
        right = green[:, 0] > red[:, 0]
        below = green[:, 1] > red[:, 1]
        if self.task == "direction":
            return torch.from_numpy(right.astype(np.int64))
        if self.task == "direction4":
            return torch.from_numpy((2 * below + right).astype(np.int64))
        if self.task == "distance":
            return torch.from_numpy(((red - green) / self.square_size).astype(np.float32))
        return torch.from_numpy((red[:, 1] >= size[0] / 2).astype(np.int64))


class SceneGenerator(Protocol):
    """What a rendered split needs of the task that drew it: its data info, and any split at any size."""

    @property
    def info(self) -> DataInfo: ...

    def render(self, split: str, img_size: int | tuple[int, int] | None = None) -> TensorImages: ...


class SyntheticImages(TensorImages):
    """A rendered split; :meth:`at_size` draws the split anew at the other size. ``task`` is any
    generator with ``info`` and ``render(split, size)`` (the red-green classification tasks)."""

    per_image = False  # re-rendered at each size; crops would falsify the labels

    def __init__(self, images: torch.Tensor, targets: torch.Tensor, task: SceneGenerator, split: str) -> None:
        super().__init__(images, targets, task.info)
        self.task = task
        self.split = split

    def at_size(self, size: int | tuple[int, int]) -> TensorImages:
        size = as_size(size)
        return self if size == self.image_size else self.task.render(self.split, size)


def _paint(size: Size, side: int, corners: list[np.ndarray], colours: tuple[tuple[int, int, int], ...]) -> torch.Tensor:
    """uint8 images (n, 3, H, W): black, with a ``side``-pixel square of each colour at its corner (a later
    colour over an earlier one), every colour's squares drawn at once."""
    h, w = size
    xy = torch.from_numpy(np.stack(corners))  # (colours, n, 2)
    x, y = xy[..., :1, None], xy[..., 1:, None]  # (colours, n, 1, 1)
    rows, cols = torch.arange(h)[:, None], torch.arange(w)
    inside = (rows >= y) & (rows < y + side) & (cols >= x) & (cols < x + side)  # (colours, n, H, W)
    # each pixel's last colour whose square covers it (0: black), as an index into the palette
    order = torch.arange(1, len(colours) + 1).view(-1, 1, 1, 1)
    which = (inside * order).amax(0)
    palette = torch.tensor([(0, 0, 0), *colours], dtype=torch.uint8)
    return palette[which].permute(0, 3, 1, 2).contiguous()
