"""Segmentation data: images with per-pixel class masks, in memory or as folders of PNG masks.

A mask folder is laid out as ADE20K ships it (``ADEChallengeData2016``)::

    ROOT/images/training/NAME.jpg        ROOT/annotations/training/NAME.png
    ROOT/images/validation/NAME.jpg      ROOT/annotations/validation/NAME.png
    (optional) ROOT/images/test/ ...     ROOT/annotations/test/ ...

(``train``/``val`` are accepted for ``training``/``validation``; without a test folder the
validation split is the test split too.) Each mask is a single-channel PNG (mode L or P) of the
image's size whose values are class ids; 255 marks unlabelled pixels. ADE20K's masks use 0 for
"other" and 1..150 for its classes: ``reduce_zero`` maps 0 to 255 and every other id c to c - 1,
as mmseg's ``reduce_zero_label``. Class names come from ``ROOT/classes.txt`` (one per line) or
``classes=N`` names them ``class_0`` ... Images are decoded with Pillow, resized on the shorter
side and centre-cropped (bicubic), masks the same way with nearest-neighbour sampling.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from ..errors import VitposError
from .class_list import read_class_list
from .dataset import DataInfo, DataSplits, ImageDataset, Size, TensorImages, as_size
from .decode import open_image
from .folders import IMAGE_EXTENSIONS, IMAGENET_MEAN, IMAGENET_STD, READ_ERRORS, decode_image, fit_to_size

__all__ = ["MaskTensors", "MaskFiles", "load_mask_splits", "resize_masks", "SPLIT_FOLDERS", "IGNORE_INDEX"]

T = TypeVar("T")

IGNORE_INDEX = 255
"""The mask value of unlabelled pixels: no loss, no metric (ADE20K's convention, as mmseg reads it)."""

SPLIT_FOLDERS = {"train": ("training", "train"), "val": ("validation", "val"), "test": ("test",)}
"""Folder names accepted for each split, in order of preference."""
MASK_MODES = ("L", "P")
"""Pillow modes of single-channel masks: 8-bit grey values or palette indices, read as class ids."""


def resize_masks(masks: torch.Tensor, size: Size) -> torch.Tensor:
    """Nearest-neighbour resize of masks (B, H, W), keeping their dtype."""
    if tuple(masks.shape[-2:]) == tuple(size):
        return masks
    return F.interpolate(masks[:, None].float(), size=tuple(size), mode="nearest-exact")[:, 0].to(masks.dtype)


class MaskTensors(TensorImages):
    """Images and masks (N, H, W) held in memory; other sizes are resized batch by batch."""

    def __getitem__(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        images, masks = super().__getitem__(index)
        return images, resize_masks(masks, self.image_size).long()


class MaskFiles(ImageDataset):
    """(image, mask) file pairs, decoded when a batch is drawn; :meth:`at_size` must set the size first."""

    def __init__(
        self, pairs: list[tuple[Path, Path]], info: DataInfo, reduce_zero: bool = False, size: Size | None = None
    ) -> None:
        super().__init__(info, size)
        self.pairs = pairs
        self.reduce_zero = reduce_zero

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        size = self._size()
        picked = [self.pairs[i] for i in index.tolist()]
        images = torch.stack([decode_image(image, size) for image, _ in picked])
        return images, torch.stack([self.decode_mask(image, mask) for image, mask in picked])

    def _size(self) -> Size:
        if self.image_size is None:
            raise RuntimeError("mask folders have no native size; call at_size(size) first")
        return self.image_size

    def at_size(self, size: int | tuple[int, int]) -> MaskFiles:
        view = copy.copy(self)
        view.image_size = as_size(size)
        return view

    def decode_mask(self, image: Path, mask: Path) -> torch.Tensor:
        """The class ids (H, W) int64 of ``mask``, checked against ``image`` and the classes."""
        image_wh = _open(image, "image", lambda img: img.size)
        mode, mask_wh, ids = _open(mask, "mask", self._read)
        if ids is None:
            raise ValueError(f"mask {mask} has mode {mode}; masks are single-channel PNGs (mode L or P) of class ids")
        if mask_wh != image_wh:
            raise ValueError(
                f"mask {mask} is {mask_wh[0]}x{mask_wh[1]} (width x height) but its image {image} is "
                f"{image_wh[0]}x{image_wh[1]}; masks must have their image's size"
            )
        if self.reduce_zero:  # as mmseg's reduce_zero_label: 0 -> 255, c -> c - 1, 255 stays
            ids = np.where((ids == 0) | (ids == IGNORE_INDEX), IGNORE_INDEX, ids - 1)
        k = self.info.num_outputs
        bad = np.unique(ids[(ids >= k) & (ids != IGNORE_INDEX)])
        if bad.size:
            shift = " (after reduce_zero)" if self.reduce_zero else ""
            raise ValueError(
                f"mask {mask} holds class id(s) {', '.join(map(str, bad[:5].tolist()))}{shift} outside the {k} classes "
                f"[0, {k}) and not the ignored {IGNORE_INDEX}; fix the mask or the class count (classes=N, classes.txt)"
            )
        return torch.from_numpy(ids)

    def _read(self, mask: Image.Image) -> tuple[str, tuple[int, int], np.ndarray | None]:
        """Mode, size (W, H) and, for a single-channel mask, its ids resized as the images are."""
        if mask.mode not in MASK_MODES:
            return mask.mode, mask.size, None
        ids = np.asarray(fit_to_size(mask, self._size(), Image.Resampling.NEAREST), dtype=np.int64)
        return mask.mode, mask.size, ids


def _open(path: Path, what: str, read: Callable[[Image.Image], T]) -> T:
    """``read(image)`` of the file ``path``; a file Pillow cannot decode is an error naming it."""
    try:
        with open_image(path, path, what) as img:
            return read(img)
    except VitposError:  # already names the file
        raise
    except READ_ERRORS as err:
        raise VitposError(f"cannot read {what} {path} ({err}); remove or replace the file") from None


def _split_folder(root: Path, kind: str, split: str) -> Path | None:
    return next((root / kind / name for name in SPLIT_FOLDERS[split] if (root / kind / name).is_dir()), None)


def _pairs(images: Path, annotations: Path) -> list[tuple[Path, Path]]:
    """Every image with the mask of the same name; an image without a mask (or the reverse) is an error."""
    found = sorted(p for p in images.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS)
    if not found:
        raise ValueError(f"{images} holds no images ({', '.join(IMAGE_EXTENSIONS)})")
    masks = {p.relative_to(annotations).with_suffix(""): p for p in annotations.rglob("*.png") if p.is_file()}
    pairs = []
    for image in found:
        key = image.relative_to(images).with_suffix("")
        if key not in masks:
            raise FileNotFoundError(
                f"image {image} has no mask: expected {annotations / key}.png; add it or remove the image"
            )
        pairs.append((image, masks.pop(key)))
    if masks:
        orphan = next(iter(masks.values()))
        raise FileNotFoundError(
            f"mask {orphan} has no image in {images} ({len(masks)} such mask(s)); add the image or remove the mask"
        )
    return pairs


def _class_names(root: Path, classes: int | None) -> tuple[str, ...]:
    listed = root / "classes.txt"
    if listed.is_file():
        names = read_class_list(listed)
        if classes is not None and classes != len(names):
            raise ValueError(f"classes={classes} but {listed} names {len(names)} classes; drop one of them")
        return names
    if classes is None:
        raise ValueError(
            f"{root} has no classes.txt; name the classes in it (one per line) or pass classes=N (ADE20K: classes=150)"
        )
    return tuple(f"class_{i}" for i in range(classes))


def load_mask_splits(path: str | Path, classes: int | None = None, reduce_zero: bool = False) -> DataSplits:
    """Train / val / test splits of the mask folder ``path`` (see the module docstring)."""
    root = Path(path).expanduser()
    if not (root / "images").is_dir() or not (root / "annotations").is_dir():
        raise FileNotFoundError(f"mask folder {root} needs images/ and annotations/ sub-folders (the ADE20K layout)")
    names = _class_names(root, classes)
    if len(names) >= IGNORE_INDEX:
        raise ValueError(f"{len(names)} classes do not fit 8-bit masks with {IGNORE_INDEX} as the ignored label")
    options = ([f"classes={classes}"] if classes is not None else []) + (["reduce_zero"] if reduce_zero else [])
    spec = ":".join([f"masks:{path}", *options])
    info = DataInfo(spec, "segmentation", classes=names, mean=IMAGENET_MEAN, std=IMAGENET_STD, position_sensitive=True)
    splits: dict[str, ImageDataset] = {}
    for split in ("train", "val", "test"):
        images, annotations = _split_folder(root, "images", split), _split_folder(root, "annotations", split)
        if (images is None) != (annotations is None):
            have = images or annotations
            raise FileNotFoundError(f"{have} has no counterpart under {root / ('annotations' if images else 'images')}")
        if images is None or annotations is None:  # both or neither, checked above
            if split != "test":
                folders = " or ".join(SPLIT_FOLDERS[split])
                raise FileNotFoundError(f"mask folder {root} has no {folders} folder under images/")
            splits[split] = splits["val"]
            continue
        splits[split] = MaskFiles(_pairs(images, annotations), info, reduce_zero)
    test_name = "val" if splits["test"] is splits["val"] else "test"
    return DataSplits(splits["train"], splits["val"], splits["test"], test_name=test_name)
