"""Data sets that hand out whole batches: ``dataset[indices] -> (uint8 images, targets)``.

Every source (synthetic, CIFAR, digits, image folders) yields uint8 images of shape
(B, C, H, W) and either integer class labels (B,), float regression targets (B, K), padded
object rows (B, M, 5) for detection (:mod:`vitpos.data.objects`) or integer segmentation
masks (B, H, W).
Conversion to float, augmentation and normalisation happen later, on the training device
(:mod:`vitpos.data.transforms`).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from PIL import Image
from torch.utils.data import Dataset

from .loader import worker_batches
from .transforms import resize

__all__ = ["DataInfo", "ImageDataset", "TensorImages", "DataSplits", "SPLITS", "as_size", "iterate_batches"]

SPLITS = ("train", "val", "test")

Size = tuple[int, int]


def as_size(size: int | tuple[int, int] | list[int]) -> Size:
    """An image size as (height, width)."""
    if isinstance(size, int):
        return (size, size)
    h, w = size
    return (int(h), int(w))


@dataclass(frozen=True)
class DataInfo:
    """What a model and a trainer need to know about a data set, shared by its splits."""

    spec: str
    """The data spec it was opened from, e.g. ``synthetic:direction``."""
    task: Literal["classification", "regression", "detection", "segmentation"]
    classes: tuple[str, ...] = ()
    """Class names (classification, and segmentation's per-pixel labels) in label order."""
    target_names: tuple[str, ...] = ()
    """Names of the regression targets, e.g. ('dx', 'dy')."""
    channels: int = 3
    mean: tuple[float, ...] = (0.0, 0.0, 0.0)
    """Per-channel mean on the [0, 1] scale, subtracted before the model."""
    std: tuple[float, ...] = (1.0, 1.0, 1.0)
    position_sensitive: bool = False
    """Labels depend on where things are: flips and crops would change them."""
    photographic: bool = False
    """Natural photographs: random resized crops and flips are on by default."""
    centre_cropped: bool = False
    """Evaluation resizes each image's shorter side and takes its centre (``eval_crop``): images read from files
    (folders, shards). Otherwise it resizes whole images to the model's size (data held as tensors)."""

    @property
    def num_outputs(self) -> int:
        """Classes (classification, detection, segmentation) or regression targets: the model's ``num_classes``."""
        return len(self.target_names) if self.task == "regression" else len(self.classes)


class ImageDataset(Dataset):
    """Base class: a split of a data set, indexed by a 1-D tensor of sample indices."""

    per_image = False
    """Whether :meth:`open_sample` hands out whole images for the per-image transforms (:mod:`.crops`)."""

    def __init__(self, info: DataInfo, image_size: Size | None) -> None:
        self.info = info
        self.image_size = image_size
        """Size (H, W) of every image this split hands out; None until :meth:`at_size`."""

    def __len__(self) -> int:
        raise NotImplementedError

    def __getitem__(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def whole(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Every sample of the split, in order: its images and targets as one batch."""
        return self[torch.arange(len(self))]

    def at_size(self, size: int | tuple[int, int]) -> ImageDataset:
        """This split handing out images of ``size`` (resized; synthetic tasks re-render)."""
        raise NotImplementedError

    def open_sample(self, index: int) -> tuple[Image.Image, torch.Tensor]:
        """Sample ``index`` whole: its image opened lazily (not decoded yet) and its target."""
        raise NotImplementedError(f"{type(self).__name__} hands out whole batches only")


class TensorImages(ImageDataset):
    """A split held in memory as a uint8 tensor; other sizes are resized batch by batch."""

    image_size: Size  # always known: the stored size unless another is given
    per_image = True

    def __init__(self, images: torch.Tensor, targets: torch.Tensor, info: DataInfo, size: Size | None = None) -> None:
        if images.dtype != torch.uint8 or images.ndim != 4:
            raise ValueError(f"images must be a uint8 tensor (N, C, H, W), got {images.dtype} {tuple(images.shape)}")
        if len(images) != len(targets):
            raise ValueError(f"{len(images)} images but {len(targets)} targets")
        native = (images.shape[-2], images.shape[-1])
        super().__init__(info, size or native)
        self.images = images
        self.targets = targets
        self._native = native

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        images = self.images[index]
        if self.image_size != self._native:
            images = resize(images, self.image_size)
        return images, self.targets[index]

    def whole(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The stored tensors themselves at the stored size (not copied: only read them), else resized."""
        if self.image_size == self._native:
            return self.images, self.targets
        return resize(self.images, self.image_size), self.targets

    def open_sample(self, index: int) -> tuple[Image.Image, torch.Tensor]:
        pixels = self.images[index].permute(1, 2, 0).numpy()
        return Image.fromarray(pixels[..., 0] if pixels.shape[-1] == 1 else pixels), self.targets[index]

    def at_size(self, size: int | tuple[int, int]) -> TensorImages:
        size = as_size(size)
        if size == self.image_size:
            return self
        view = copy.copy(self)  # shares the stored tensors
        view.image_size = size
        return view


@dataclass
class DataSplits:
    """The train / val / test splits of one data set."""

    train: ImageDataset
    val: ImageDataset
    test: ImageDataset
    test_name: str = field(default="test", kw_only=True)
    """What the data set calls the split in ``test``: ``val`` where it has no test split and ``test`` repeats val."""
    made: str = field(default="", kw_only=True)
    """How the splits were drawn where the data set did not come split (a flat image folder)."""

    @property
    def info(self) -> DataInfo:
        """The facts shared by every split."""
        return self.train.info

    @property
    def image_size(self) -> Size | None:
        """The native image size (H, W) of the data, or None where images vary (folders)."""
        return self.train.image_size

    def split(self, name: str) -> ImageDataset:
        """The split called ``name`` (train, val or test)."""
        if name not in SPLITS:
            raise ValueError(f"unknown split {name!r}; valid splits: {', '.join(SPLITS)}")
        return getattr(self, name)

    def at_size(self, size: int | tuple[int, int]) -> DataSplits:
        """Every split at image size ``size``."""
        train, val, test = (self.split(name).at_size(size) for name in SPLITS)
        return dataclasses.replace(self, train=train, val=val, test=test)


def iterate_batches(
    dataset: Dataset, batches: Sequence[Any], workers: int = 0, pin_memory: bool = False
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Yield ``dataset[b]`` for each index batch ``b``, decoded in ``workers`` processes if > 0."""
    if workers == 0:
        return (dataset[b] for b in batches)
    # the sampler yields whole index batches and the dataset builds each batch
    return worker_batches(dataset, workers, batches, pin_memory)
