"""Image folders: one sub-folder per class, images decoded with Pillow when a batch is drawn.

``ROOT`` either holds ``train/`` plus ``val/`` and/or ``test/`` (each with the same class
folders, the ImageNet layout), or the class folders themselves, which are then split
80 / 10 / 10 at random with a fixed seed. Training takes each whole image through the
per-image transforms (:class:`~.crops.TrainCrop`); a batch at a size (evaluation) is each image
resized on its shorter side to ``size / eval_crop`` and centre-cropped (:class:`~.crops.EvalCrop`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image

from ..errors import VitposError
from .class_list import check_class_count, check_distinct_names, check_folder_name
from .crops import EvalCrop
from .dataset import DataInfo, DataSplits, ImageDataset, Size, as_size
from .decode import READ_ERRORS, open_image, to_mode, unreadable

__all__ = [
    "ImageFiles",
    "load_folder_splits",
    "decode_image",
    "fit_to_size",
    "IMAGE_EXTENSIONS",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
]

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".avif")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
EVAL_CROP = 0.875
"""The evaluation crop fraction of DeiT's released code (resize to 256, centre-crop 224)."""


class ImageFiles(ImageDataset):
    """Labelled image files; :meth:`at_size` must set the size before batches are drawn."""

    per_image = True

    def __init__(
        self,
        samples: list[tuple[Path, int]],
        info: DataInfo,
        size: Size | None = None,
        eval_crop: float = EVAL_CROP,
        interpolation: str = "bicubic",
    ) -> None:
        super().__init__(info, size)
        self.samples = samples
        self.eval_crop = eval_crop
        self.interpolation = interpolation

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.image_size is None:
            raise RuntimeError("image folders have no native size; call at_size(size) first")
        crop = EvalCrop(self.image_size, "RGB", self.eval_crop, self.interpolation)
        picked = [self.samples[i] for i in index.tolist()]
        images = []
        for path, _ in picked:
            with open_image(path) as img:
                images.append(crop(img))
        return torch.stack(images), torch.tensor([label for _, label in picked], dtype=torch.int64)

    def open_sample(self, index: int) -> tuple[Image.Image, torch.Tensor]:
        path, label = self.samples[index]
        return open_image(path), torch.tensor(label)

    def at_size(self, size: int | tuple[int, int]) -> ImageFiles:
        return ImageFiles(self.samples, self.info, as_size(size), self.eval_crop, self.interpolation)

    def evaluated_with(self, eval_crop: float, interpolation: str) -> ImageFiles:
        """These files evaluated with another crop fraction and resampling."""
        return ImageFiles(self.samples, self.info, self.image_size, eval_crop, interpolation)


def fit_to_size(img: Image.Image, size: Size, resample: Image.Resampling = Image.Resampling.BICUBIC) -> Image.Image:
    """``img`` resized on its shorter side to cover ``size`` (H, W), then centre-cropped to it."""
    h, w = size
    scale = max(h / img.height, w / img.width)
    new_w, new_h = max(w, round(img.width * scale)), max(h, round(img.height * scale))
    img = img.resize((new_w, new_h), resample)
    left, top = (new_w - w) // 2, (new_h - h) // 2
    return img.crop((left, top, left + w, top + h))


def decode_image(path: Path, size: Size) -> torch.Tensor:
    """RGB uint8 (3, H, W): resized on its shorter side, then centre-cropped to ``size``."""
    try:
        with open_image(path) as img:
            pixels = np.asarray(fit_to_size(to_mode(img, "RGB"), size), dtype=np.uint8)
    except VitposError:  # already names the file
        raise
    except READ_ERRORS as err:
        raise unreadable(path, err) from None
    return torch.from_numpy(pixels.copy()).permute(2, 0, 1)


def _class_folders(root: Path) -> dict[str, list[Path]]:
    """Class name -> its image files; an empty class folder, or a name no class list can hold, is an error."""
    classes = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not classes:
        raise ValueError(f"{root} holds no class folders; expected one sub-folder of images per class")
    for folder in classes:
        check_folder_name(folder)
    check_distinct_names([folder.name for folder in classes], f"image folder {root}", "class folder")
    found = {}
    for folder in classes:
        files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_EXTENSIONS and p.is_file())
        if not files:
            raise ValueError(
                f"class folder {folder} holds no images ({', '.join(IMAGE_EXTENSIONS)}); "
                "add images or remove the folder"
            )
        found[folder.name] = files
    return found


def _samples(root: Path, classes: tuple[str, ...]) -> list[tuple[Path, int]]:
    found = _class_folders(root)
    unknown = sorted(set(found) - set(classes))
    if unknown:
        raise ValueError(f"{root} has class folders absent from the training split: {', '.join(unknown)}")
    return [(path, classes.index(name)) for name, files in found.items() for path in files]


def load_folder_splits(path: str | Path, seed: int = 0) -> DataSplits:
    """Train / val / test splits of the image folder ``path`` (see the module docstring)."""
    root = Path(path).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"image folder {root} does not exist (or is not a folder)")
    split_given = (root / "train").is_dir()
    classes = tuple(_class_folders(root / "train" if split_given else root))
    check_class_count(classes, f"image folder {root / 'train' if split_given else root}")
    info = DataInfo(
        spec=f"folder:{path}",
        task="classification",
        classes=classes,
        mean=IMAGENET_MEAN,
        std=IMAGENET_STD,
        photographic=True,
        centre_cropped=True,
    )
    if split_given:
        held = [root / name for name in ("val", "test") if (root / name).is_dir()]
        if not held:
            raise FileNotFoundError(f"{root} has train/ but neither val/ nor test/; add one of them")
        train = _samples(root / "train", classes)
        val = _samples(held[0], classes)
        test = _samples(held[-1], classes)
        test_name, made = held[-1].name, ""
    else:
        samples = _samples(root, classes)
        order = np.random.default_rng(seed).permutation(len(samples))
        n_held = max(1, len(samples) // 10)
        val, test, train = ([samples[i] for i in part] for part in np.split(order, [n_held, 2 * n_held]))
        test_name = "test"
        made = f"class folders split at random (seed {seed}): 10% val, 10% test ({n_held} images each), the rest train"
    splits = (ImageFiles(train, info), ImageFiles(val, info), ImageFiles(test, info))
    return DataSplits(*splits, test_name=test_name, made=made)
