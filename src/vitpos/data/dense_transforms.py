"""Detection and segmentation transforms, one image at a time, with boxes and masks kept on the pixels.

DETR's recipe (Carion et al. 2020, its ``make_coco_transforms``): in training a horizontal flip
(p = 0.5), then with even odds either a resize of the shorter side to one of ``scales`` (480 to
800 in steps of 32, the longer side at most 1333), or a resize to one of 400 / 500 / 600, a
random crop of 384 to 600 pixels a side, and the multi-scale resize; in evaluation the shorter
side is resized to 800 (longer <= 1333). :meth:`DenseRecipe.scaled` shrinks every size by one
factor for small images (e.g. ``scaled(32)``: shorter side 32, longer <= 53).

Boxes are corners (x0, y0, x1, y1) in continuous pixel coordinates: pixel column j spans
[j, j + 1), so an image W wide spans [0, W]. A flip maps x to W - x, as DETR's; kornia's
``bbox_xyxy`` ops read corners as pixel indices and map x to W - 1 - x, a pixel off for COCO's
boxes, so boxes move here by exact arithmetic while images are resized by
:func:`~.transforms.resize` (bilinear, antialiased when shrinking) and masks by nearest neighbour.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from .masks import resize_masks
from .transforms import resize

__all__ = ["DenseSample", "DenseRecipe", "DETR_SCALES", "hflip", "resize_sample", "crop", "shorter_side_size"]

Size = tuple[int, int]

DETR_SCALES = (480, 512, 544, 576, 608, 640, 672, 704, 736, 768, 800)
"""DETR's training sizes of the shorter side."""


@dataclass(frozen=True)
class DenseSample:
    """One image with its objects and (segmentation) its mask."""

    image: torch.Tensor
    """uint8 (C, H, W)."""
    labels: torch.Tensor
    """Object classes (n,) int64."""
    boxes: torch.Tensor
    """Object corners (n, 4) in pixels, float32."""
    mask: torch.Tensor | None = None
    """Class per pixel (H, W), or None (detection)."""

    @classmethod
    def from_normalised(
        cls, image: torch.Tensor, labels: torch.Tensor, boxes: torch.Tensor, mask: torch.Tensor | None = None
    ) -> DenseSample:
        """A sample from boxes as (cx, cy, w, h) over the image's width and height."""
        h, w = int(image.shape[-2]), int(image.shape[-1])
        cx, cy, bw, bh = (boxes.float() * torch.tensor([w, h, w, h], dtype=torch.float32)).unbind(-1)
        corners = torch.stack([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2], dim=-1).reshape(-1, 4)
        return cls(image, labels, corners, mask)

    @property
    def size(self) -> Size:
        """(H, W) of the image."""
        return (int(self.image.shape[-2]), int(self.image.shape[-1]))

    def normalised_boxes(self) -> torch.Tensor:  # n, 4
        """Boxes as (cx, cy, w, h) over the image's own width and height (DETR's targets)."""
        h, w = self.size
        x0, y0, x1, y1 = self.boxes.unbind(-1)
        cxcywh = torch.stack([(x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0], dim=-1)
        return cxcywh / torch.tensor([w, h, w, h], dtype=cxcywh.dtype)


def hflip(sample: DenseSample) -> DenseSample:
    """Mirror left-right: pixels, mask, and boxes x -> W - x."""
    w = sample.size[1]
    x0, y0, x1, y1 = sample.boxes.unbind(-1)
    boxes = torch.stack([w - x1, y0, w - x0, y1], dim=-1)
    mask = None if sample.mask is None else sample.mask.flip(-1)
    return DenseSample(sample.image.flip(-1), sample.labels, boxes, mask)


def resize_sample(sample: DenseSample, size: Size) -> DenseSample:
    """Resize to ``size`` (H, W): the image bilinearly, the mask by nearest neighbour, boxes scaled per axis."""
    h, w = sample.size
    if (h, w) == tuple(size):
        return sample
    scale = torch.tensor([size[1] / w, size[0] / h, size[1] / w, size[0] / h], dtype=sample.boxes.dtype)
    mask = None if sample.mask is None else resize_masks(sample.mask[None], size)[0]
    return DenseSample(resize(sample.image[None], size)[0], sample.labels, sample.boxes * scale, mask)


def crop(sample: DenseSample, top: int, left: int, height: int, width: int) -> DenseSample:
    """The window of ``height`` x ``width`` pixels at (top, left); boxes are shifted and clipped to it,
    and boxes left with no area are dropped (DETR's ``crop``)."""
    h, w = sample.size
    if min(top, left) < 0 or min(height, width) <= 0 or top + height > h or left + width > w:
        raise ValueError(f"crop {height}x{width} at ({top}, {left}) does not fit in a {h}x{w} image")
    shift = torch.tensor([left, top, left, top], dtype=sample.boxes.dtype)
    limit = torch.tensor([width, height, width, height], dtype=sample.boxes.dtype)
    boxes = torch.minimum(sample.boxes - shift, limit).clamp(min=0)
    keep = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
    window = (..., slice(top, top + height), slice(left, left + width))
    mask = None if sample.mask is None else sample.mask[window]
    return DenseSample(sample.image[window], sample.labels[keep], boxes[keep], mask)


def shorter_side_size(size: Size, shorter: int, max_size: int | None = None) -> Size:
    """(H, W) with the shorter side ``shorter`` and the aspect kept, the shorter side reduced so the
    longer stays <= ``max_size`` (DETR's ``get_size_with_aspect_ratio``, truncating as it does)."""
    h, w = size
    small, large = float(min(h, w)), float(max(h, w))
    if max_size is not None and large / small * shorter > max_size:
        shorter = round(max_size * small / large)
    if min(h, w) == shorter:
        return (h, w)
    if w < h:
        return (max(int(shorter * h / w), 1), shorter)
    return (shorter, max(int(shorter * w / h), 1))


def _pick(values: tuple[int, ...], generator: torch.Generator) -> int:
    return values[int(torch.randint(len(values), (), generator=generator))]


def _between(low: int, high: int, generator: torch.Generator) -> int:
    """A uniform integer in [low, high]."""
    return int(torch.randint(low, high + 1, (), generator=generator))


@dataclass(frozen=True)
class DenseRecipe:
    """DETR's training and evaluation transforms (the defaults are DETR's, for COCO)."""

    scales: tuple[int, ...] = DETR_SCALES
    """Shorter sides of the multi-scale training resize."""
    max_size: int | None = 1333
    """The longest side after any resize."""
    eval_size: int = 800
    """The shorter side in evaluation."""
    crop_prescales: tuple[int, ...] = (400, 500, 600)
    """Shorter sides of the resize before the random crop (no limit on the longer)."""
    crop_range: tuple[int, int] = (384, 600)
    """Smallest and largest side of the random crop."""
    crop_prob: float = 0.5
    """Odds of the resize-crop-resize branch over a plain resize."""
    hflip: float = 0.5
    """Odds of a horizontal flip."""

    @classmethod
    def scaled(cls, eval_size: int) -> DenseRecipe:
        """DETR's recipe with every size times ``eval_size / 800`` (rounded, at least 1 pixel)."""
        factor = eval_size / 800
        scale = lambda sizes: tuple(max(round(s * factor), 1) for s in sizes)  # noqa: E731
        low, high = scale(cls.crop_range)
        return cls(
            scales=scale(DETR_SCALES),
            max_size=max(round(1333 * factor), eval_size),
            eval_size=eval_size,
            crop_prescales=scale(cls.crop_prescales),
            crop_range=(low, high),
        )

    def replace(self, **changes: object) -> DenseRecipe:
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]  # fields checked by dataclasses

    def evaluation(self, sample: DenseSample) -> DenseSample:
        """The evaluation resize (shorter side ``eval_size``, longer <= ``max_size``)."""
        return resize_sample(sample, shorter_side_size(sample.size, self.eval_size, self.max_size))

    def training(self, sample: DenseSample, generator: torch.Generator) -> DenseSample:
        """Flip, then a multi-scale resize or resize-crop-resize, drawn from ``generator``."""
        if float(torch.rand((), generator=generator)) < self.hflip:
            sample = hflip(sample)
        if float(torch.rand((), generator=generator)) < self.crop_prob:
            sample = resize_sample(sample, shorter_side_size(sample.size, _pick(self.crop_prescales, generator)))
            h, w = sample.size
            low, high = self.crop_range
            ch, cw = _between(min(low, h), min(h, high), generator), _between(min(low, w), min(w, high), generator)
            sample = crop(sample, _between(0, h - ch, generator), _between(0, w - cw, generator), ch, cw)
        size = shorter_side_size(sample.size, _pick(self.scales, generator), self.max_size)
        return resize_sample(sample, size)
