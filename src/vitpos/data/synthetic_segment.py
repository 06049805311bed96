"""Red-green segmentation: the scenes of :mod:`.synthetic`, labelled per pixel.

Each image holds a red and a green square at random, non-overlapping places (on the lattice of
their size by default), as in the thesis' tasks; the targets are masks (H, W):

``segment``           background (0), red (1), green (2): the colour of each pixel's square
``segment_absolute``  background (0), red_upper, red_lower, green_upper, green_lower: the
                      colour and the image half its square's centre lies in, which a model can
                      tell only from absolute position (the dense form of the thesis' §4.2 task)

Images vary in size and aspect ratio: each one's height and width are drawn independently and
uniformly among the sides from ``(1 - vary)`` times the task's size up to it (multiples of the square
side when squares sit on its lattice), so batches are padded with a padding mask and the padding is
labelled ignore (:mod:`.padded`); ``vary=0`` draws every image at the task's size. Any split is drawn
around any image size (:meth:`SyntheticSegmentation.render`), squares keeping their pixel size, so
models trained at one size can be evaluated at others.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import torch

from ..errors import ConfigError
from ..validation import bounded
from .dataset import DataInfo, as_size
from .dense_transforms import DenseSample
from .padded import PaddedImages
from .synthetic import _SPLIT_STREAM, TRAIN_COLOURS, SyntheticTask, _paint

__all__ = ["SEGMENT_TASKS", "SyntheticSegmentation"]

_NO_LABELS, _NO_BOXES = torch.zeros(0, dtype=torch.int64), torch.zeros(0, 4)

SEGMENT_TASKS = ("segment", "segment_absolute")

_CLASSES = {
    "segment": ("background", "red", "green"),
    "segment_absolute": ("background", "red_upper", "red_lower", "green_upper", "green_lower"),
}


@dataclass(frozen=True)
class SyntheticSegmentation(SyntheticTask):
    """One red-green segmentation task; every split is a pure function of these fields."""

    task: str = bounded("segment", choices=SEGMENT_TASKS)
    vary: float = bounded(0.25, ge=0, lt=1)
    """How much smaller than ``img_size`` an image may be, as a fraction of each side."""

    def __post_init__(self) -> None:
        super().__post_init__()
        h, w = (min(sides) for sides in self.sides)
        if min(h, w) < 2 * self.square_size:
            raise ConfigError(
                f"the smallest images ({h}x{w}, (1 - vary) = {1 - self.vary:g} of img) have no room for two "
                f"{self.square_size}-pixel squares; use a smaller vary or a larger img"
            )

    @property
    def sides(self) -> tuple[list[int], list[int]]:
        """The heights and the widths an image is drawn with."""
        step = self.square_size if self.aligned else 1

        def choices(side: int) -> list[int]:
            low = math.ceil((1 - self.vary) * side - 1e-9)
            return sorted({side, *(v for v in range(low, side + 1) if v % step == 0)})

        h, w = as_size(self.img_size)
        return choices(h), choices(w)

    @property
    def spec(self) -> str:
        """The data spec that opens exactly this task (every option that is not the default)."""
        name = f"synthetic:{self.task}"
        vary = "" if self.vary == SyntheticSegmentation.vary else f":vary={self.vary:g}"
        return super().spec.replace(name, name + vary, 1)

    @property
    def info(self) -> DataInfo:
        """The per-pixel classes of this task."""
        return DataInfo(self.spec, "segmentation", classes=_CLASSES[self.task], position_sensitive=True)

    def render(  # type: ignore[override]  # a segmentation split pads its images of varied sizes
        self, split: str, img_size: int | tuple[int, int] | None = None
    ) -> PaddedImages:
        """Draw ``split`` around ``img_size`` (default: the task's); squares keep their pixel size."""
        size = as_size(self.img_size if img_size is None else img_size)
        task = dataclasses.replace(self, img_size=size)  # validates the new size
        rng = np.random.default_rng([self.seed, _SPLIT_STREAM[split]])
        n = getattr(self, split)
        heights, widths = task.sides
        sizes = [(int(rng.choice(heights)), int(rng.choice(widths))) for _ in range(n)] if self.vary else [size] * n
        samples: list[DenseSample] = [None] * n  # type: ignore[list-item]  # every slot is filled below
        for hw in sorted(set(sizes)):  # one rendering per size, as the fixed-size task draws it
            where = [i for i, s in enumerate(sizes) if s == hw]
            corners = task._sample(rng, len(where), hw)
            images = _paint(hw, self.square_size, list(corners), TRAIN_COLOURS)
            masks = self._masks(images, corners, hw[0])
            for j, i in enumerate(where):
                samples[i] = DenseSample(images[j], _NO_LABELS, _NO_BOXES, masks[j].long())
        return PaddedImages(
            samples.__getitem__, sizes, self.info, size, resized=lambda other: self.render(split, other)
        )

    def _masks(self, images: torch.Tensor, corners: tuple[np.ndarray, np.ndarray], height: int) -> torch.Tensor:
        """uint8 masks (n, H, W) read off the painted squares (they never overlap)."""
        red = (images[:, 0] == 255) & (images[:, 1] == 0)
        green = (images[:, 1] == 255) & (images[:, 0] == 0)
        if self.task == "segment":
            labels = [torch.ones(len(images)), torch.full((len(images),), 2)]
        else:  # 1 + lower for red, 3 + lower for green, by the row of each square's centre
            lower = [torch.from_numpy(xy[:, 1] + self.square_size / 2 >= height / 2) for xy in corners]
            labels = [1 + lower[0].long(), 3 + lower[1].long()]
        masks = torch.zeros(images.shape[0], *images.shape[2:], dtype=torch.uint8)
        for where, label in zip((red, green), labels, strict=True):
            masks = torch.where(where, label.view(-1, 1, 1).to(torch.uint8), masks)
        return masks
