"""Batches of images of different sizes: padded to the largest at the bottom and right, with a padding mask.

As DETR's ``nested_tensor_from_tensor_list``, every image keeps its own size and aspect ratio; the
batch is padded with zeros to its largest height and width, each rounded up to a multiple of the
model's stride, and a boolean mask (B, H, W) is True on padded pixels. The targets travel as
:class:`PaddedTargets`: detection objects normalised by each image's own (unpadded) size, or
segmentation masks holding :data:`~.masks.IGNORE_INDEX` on padding, with the padding mask and
every image's original size (before any resize), on which COCO AP is computed.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..padding import Padding
from .dataset import DataInfo, ImageDataset, Size, as_size
from .dense_transforms import DenseRecipe, DenseSample
from .masks import IGNORE_INDEX
from .objects import ObjectTargets, pad_objects

__all__ = [
    "PaddedTargets",
    "PaddedImages",
    "collate_padded",
    "padded_size",
    "model_inputs",
    "plain_targets",
    "fit_split",
    "padded_for",
]


@dataclass(frozen=True)
class PaddedTargets:
    """The targets of a padded batch, moved between devices as one."""

    targets: torch.Tensor
    """Detection: object rows (B, M, 5) normalised by each image's own size; segmentation: masks (B, H, W)."""
    padding_mask: torch.Tensor
    """(B, H, W) bool, True on padded pixels."""
    sizes: torch.Tensor
    """(B, 2) int64: each image's original (H, W), before any resize."""

    def __len__(self) -> int:
        return len(self.targets)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> PaddedTargets:
        """Every tensor on ``device``."""
        move = lambda t: t.to(device, non_blocking=non_blocking)  # noqa: E731
        return PaddedTargets(move(self.targets), move(self.padding_mask), move(self.sizes))

    def pin_memory(self) -> PaddedTargets:
        """Every tensor in pinned memory (for a DataLoader with ``pin_memory``)."""
        return PaddedTargets(self.targets.pin_memory(), self.padding_mask.pin_memory(), self.sizes.pin_memory())

    @property
    def valid_sizes(self) -> torch.Tensor:  # B, 2
        """Each image's (H, W) in the batch, without its padding."""
        return Padding.from_mask(self.padding_mask).valid


def padded_size(sizes: Sequence[Size], stride: int) -> Size:
    """The largest height and width of ``sizes``, each rounded up to a multiple of ``stride``."""
    up = lambda n: -(-n // stride) * stride  # noqa: E731
    return (up(max(h for h, _ in sizes)), up(max(w for _, w in sizes)))


def collate_padded(
    samples: Sequence[DenseSample], original_sizes: Sequence[Size], stride: int = 1, slots: int | None = None
) -> tuple[torch.Tensor, PaddedTargets]:
    """uint8 images (B, C, H, W) padded with zeros, and their :class:`PaddedTargets`.

    Samples with masks give segmentation targets; without, detection rows (``slots`` rows each).
    """
    if not samples:
        raise ValueError("collate_padded needs at least one sample")
    h, w = padded_size([s.size for s in samples], stride)
    images = torch.zeros(len(samples), samples[0].image.shape[0], h, w, dtype=torch.uint8)
    padding = torch.ones(len(samples), h, w, dtype=torch.bool)
    for i, s in enumerate(samples):
        sh, sw = s.size
        images[i, :, :sh, :sw] = s.image
        padding[i, :sh, :sw] = False
    segmenting = [s.mask is not None for s in samples]
    if any(segmenting) and not all(segmenting):
        raise ValueError("collate_padded: some samples have masks and some do not; give masks for all or none")
    if all(segmenting):
        targets = torch.full((len(samples), h, w), IGNORE_INDEX, dtype=torch.int64)
        for i, s in enumerate(samples):
            assert s.mask is not None
            targets[i, : s.size[0], : s.size[1]] = s.mask
    else:
        targets = pad_objects([ObjectTargets(s.labels, s.normalised_boxes()) for s in samples], slots)
    sizes = torch.tensor([list(size) for size in original_sizes], dtype=torch.int64).reshape(-1, 2)
    return images, PaddedTargets(targets, padding, sizes)


def model_inputs(images: torch.Tensor, targets: Any) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The model's input and keyword arguments for a batch: padded pixels set to zero after normalisation
    (as DETR pads) and ``padding_mask`` for a padded batch; other batches unchanged."""
    if not isinstance(targets, PaddedTargets):
        return images, {}
    mask = targets.padding_mask
    return images.masked_fill(mask[:, None], 0), {"padding_mask": mask}


def plain_targets(targets: Any) -> torch.Tensor:
    """The target tensor of a batch (the rows or masks of :class:`PaddedTargets`)."""
    return targets.targets if isinstance(targets, PaddedTargets) else targets


def _batch_generator(seed: int, index: torch.Tensor) -> torch.Generator:
    """A generator seeded by the batch's sample indices: a batch's augmentation is a pure function of
    them, so a resumed run draws the same, and a sample drawn in another batch gets another."""
    digest = hashlib.blake2b(index.to(torch.int64).numpy().tobytes() + seed.to_bytes(8, "little"), digest_size=8)
    return torch.Generator().manual_seed(int.from_bytes(digest.digest(), "little") >> 1)


class PaddedImages(ImageDataset):
    """A split whose images keep their own sizes: each batch is transformed image by image and padded.

    ``load(i)`` gives sample ``i`` at its original size; ``recipe`` (None: none) resizes it, with
    :meth:`DenseRecipe.training` when ``train`` else :meth:`DenseRecipe.evaluation`; ``stride``
    is what padded sizes are multiples of. ``image_size`` is the nominal size (the recipe's
    evaluation size, or the size the images were drawn around).
    """

    def __init__(
        self,
        load: Callable[[int], DenseSample],
        original_sizes: Sequence[Size],
        info: DataInfo,
        image_size: Size,
        *,
        recipe: DenseRecipe | None = None,
        train: bool = False,
        stride: int = 1,
        slots: int | None = None,
        seed: int = 0,
        resized: Callable[[Size], PaddedImages] | None = None,
    ) -> None:
        super().__init__(info, image_size)
        self.load = load
        self.original_sizes = list(original_sizes)
        self.recipe, self.train, self.stride, self.slots, self.seed = recipe, train, stride, slots, seed
        self.resized = resized

    def __len__(self) -> int:
        return len(self.original_sizes)

    def __getitem__(self, index: torch.Tensor) -> tuple[torch.Tensor, PaddedTargets]:  # type: ignore[override]  # targets move as one object with .to()
        generator = _batch_generator(self.seed, index) if self.train and self.recipe else None
        samples = []
        for i in index.tolist():
            sample = self.load(i)
            if self.recipe is not None:
                sample = self.recipe.training(sample, generator) if generator else self.recipe.evaluation(sample)
            samples.append(sample)
        sizes = [self.original_sizes[i] for i in index.tolist()]
        return collate_padded(samples, sizes, self.stride, self.slots)

    def at_size(self, size: int | tuple[int, int]) -> PaddedImages:
        """This split around ``size``: drawn anew at that size (synthetic), or with the recipe scaled so
        the shorter side is ``min(size)`` (files)."""
        size = as_size(size)
        if size == self.image_size:
            return self
        if self.resized is not None:
            return self.resized(size).padded_to(self.stride)
        out = copy.copy(self)
        out.recipe = DenseRecipe.scaled(min(size)) if self.recipe is None else _rescaled(self.recipe, min(size))
        out.image_size = size
        return out

    def for_evaluation(self) -> PaddedImages:
        """This split with the evaluation transform (no random flips, crops or scales)."""
        out = copy.copy(self)
        out.train = False
        return out

    def padded_to(self, stride: int) -> PaddedImages:
        """This split padding its batches to multiples of ``stride``."""
        out = copy.copy(self)
        out.stride = stride
        return out


def _rescaled(recipe: DenseRecipe, eval_size: int) -> DenseRecipe:
    """DETR's recipe scaled to ``eval_size``, keeping ``recipe``'s flip and crop odds."""
    return DenseRecipe.scaled(eval_size).replace(hflip=recipe.hflip, crop_prob=recipe.crop_prob)


def padded_for(split: ImageDataset, stride: int) -> ImageDataset:
    """A split of padded batches padding to multiples of ``stride`` (a model's); other splits as they are."""
    return split.padded_to(stride) if isinstance(split, PaddedImages) else split


def fit_split(split: ImageDataset, size: Size, stride: int) -> ImageDataset:
    """``split`` at the model's image ``size``, padded batches to multiples of its ``stride``."""
    return padded_for(split.at_size(size), stride)
