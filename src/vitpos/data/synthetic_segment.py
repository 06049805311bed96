"""Red-green segmentation: the scenes of :mod:`.synthetic`, labelled per pixel.

Each image holds a red and a green square at random, non-overlapping places (on the lattice of
their size by default), as in the thesis' tasks; the targets are masks (H, W):

``segment``           background (0), red (1), green (2): the colour of each pixel's square
``segment_absolute``  background (0), red_upper, red_lower, green_upper, green_lower: the
                      colour and the image half its square's centre lies in, which a model can
                      tell only from absolute position (the dense form of the thesis' §4.2 task)

Any split is drawn at any image size (:meth:`SyntheticSegmentation.render`), squares keeping
their pixel size, so models trained at one size can be evaluated at others.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from ..validation import bounded
from .dataset import DataInfo, as_size
from .masks import MaskTensors
from .synthetic import _SPLIT_STREAM, TRAIN_COLOURS, SyntheticImages, SyntheticTask, _paint

__all__ = ["SEGMENT_TASKS", "SyntheticSegmentation", "SyntheticMasks"]

SEGMENT_TASKS = ("segment", "segment_absolute")

_CLASSES = {
    "segment": ("background", "red", "green"),
    "segment_absolute": ("background", "red_upper", "red_lower", "green_upper", "green_lower"),
}


@dataclass(frozen=True)
class SyntheticSegmentation(SyntheticTask):
    """One red-green segmentation task; every split is a pure function of these fields."""

    task: str = bounded("segment", choices=SEGMENT_TASKS)

    @property
    def info(self) -> DataInfo:
        """The per-pixel classes of this task."""
        return DataInfo(self.spec, "segmentation", classes=_CLASSES[self.task], position_sensitive=True)

    def render(self, split: str, img_size: int | tuple[int, int] | None = None) -> SyntheticMasks:
        """Draw ``split`` at ``img_size`` (default: the task's); squares keep their pixel size."""
        size = as_size(self.img_size if img_size is None else img_size)
        task = dataclasses.replace(self, img_size=size)  # validates the new size
        rng = np.random.default_rng([self.seed, _SPLIT_STREAM[split]])
        corners = task._sample(rng, getattr(self, split), size)
        images = _paint(size, self.square_size, list(corners), TRAIN_COLOURS)
        return SyntheticMasks(images, self._masks(images, corners, size[0]), self, split)

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


class SyntheticMasks(MaskTensors, SyntheticImages):
    """A rendered split of masks (N, H, W); :meth:`at_size` draws the split anew at the other size."""
