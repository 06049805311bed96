"""Per-image geometric transforms, run in the data-loading workers on each whole image.

:class:`TrainCrop` is DeiT's (torchvision's) RandomResizedCrop of the *full* image plus a
horizontal flip; :class:`EvalCrop` resizes the shorter side to ``size / crop_fraction`` and takes
the centre (DeiT: 256 -> 224). Both take a lazily opened Pillow image (:mod:`.decode`), so a JPEG
is decoded only at the scale its crop needs, and both hand back uint8 (C, H, W). Every source
(image folders, WebDataset shards, CIFAR, digits) goes through them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image

from .decode import Box, crop_resize, to_tensor

__all__ = ["TrainCrop", "EvalCrop", "random_resized_box", "centre_box"]


def random_resized_box(
    rng: np.random.Generator, width: int, height: int, scale: tuple[float, float], ratio: tuple[float, float]
) -> Box:
    """torchvision's RandomResizedCrop parameters: an area fraction in ``scale``, a log-uniform aspect in ``ratio``.

    Ten tries for a box that fits; then the whole image, cropped to the nearest aspect in ``ratio``.
    """
    area = width * height
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target = area * rng.uniform(*scale)
        aspect = math.exp(rng.uniform(*log_ratio))
        w, h = round(math.sqrt(target * aspect)), round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            top, left = int(rng.integers(0, height - h + 1)), int(rng.integers(0, width - w + 1))
            return (left, top, w, h)
    own = width / height
    if own < min(ratio):
        w, h = width, round(width / min(ratio))
    elif own > max(ratio):
        w, h = round(height * max(ratio)), height
    else:
        w, h = width, height
    return ((width - w) // 2, (height - h) // 2, w, h)


def centre_box(width: int, height: int, size: tuple[int, int], crop_fraction: float) -> Box:
    """The centre region that resizing the shorter side to ``size / crop_fraction`` then cropping ``size`` keeps."""
    out_h, out_w = size
    scale = min(width / (out_w / crop_fraction), height / (out_h / crop_fraction))  # source pixels per output pixel
    w, h = min(width, out_w * scale), min(height, out_h * scale)
    return ((width - w) / 2, (height - h) / 2, w, h)


@dataclass(frozen=True)
class TrainCrop:
    """RandomResizedCrop of the whole image (``scale`` None: the whole image, resized) then a random flip."""

    size: tuple[int, int]
    mode: str = "RGB"
    scale: tuple[float, float] | None = (0.08, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)
    hflip: float = 0.5
    interpolation: str = "bicubic"

    def __call__(self, img: Image.Image, rng: np.random.Generator) -> torch.Tensor:
        """One augmented view of ``img`` as uint8 (C, H, W), its randomness drawn from ``rng``."""
        w, h = img.size
        box = (0, 0, w, h) if self.scale is None else random_resized_box(rng, w, h, self.scale, self.ratio)
        out = to_tensor(crop_resize(img, box, self.size, self.mode, self.interpolation))
        return out.flip(-1) if self.hflip > 0 and rng.random() < self.hflip else out


@dataclass(frozen=True)
class EvalCrop:
    """Resize the shorter side to ``size / crop_fraction``, then take the centre ``size``."""

    size: tuple[int, int]
    mode: str = "RGB"
    crop_fraction: float = 0.875
    interpolation: str = "bicubic"

    def __call__(self, img: Image.Image) -> torch.Tensor:
        """The evaluation view of ``img`` as uint8 (C, H, W)."""
        box = centre_box(*img.size, self.size, self.crop_fraction)
        return to_tensor(crop_resize(img, box, self.size, self.mode, self.interpolation))
