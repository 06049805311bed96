"""Folders of real photographs for tests: crops of scikit-learn's two sample JPEGs, one class per region."""

from pathlib import Path

import numpy as np
import sklearn.datasets
from PIL import Image

SAMPLE_PHOTOS = Path(sklearn.datasets.__file__).parent / "images"
"""scikit-learn's bundled photographs (china.jpg, flower.jpg: 640 x 427 JPEGs)."""

CLASSES = ("china_top", "china_bottom", "flower_top", "flower_bottom")


def photo_folder(
    root: Path, per_class: int = 6, held: int = 2, size: tuple[int, int] = (96, 72), seed: int = 0
) -> Path:
    """``root/train`` and ``root/val`` with one folder per class of JPEG crops (``size`` = W, H) of its photo half."""
    rng = np.random.default_rng(seed)
    for name in CLASSES:
        photo, half = name.split("_")
        with Image.open(SAMPLE_PHOTOS / f"{photo}.jpg") as img:
            full = img.convert("RGB")
        top = 0 if half == "top" else full.height // 2
        for split, count in (("train", per_class), ("val", held)):
            folder = root / split / name
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(count):
                w, h = size
                x = int(rng.integers(0, full.width - w))
                y = top + int(rng.integers(0, full.height // 2 - h))
                full.crop((x, y, x + w, y + h)).save(folder / f"{i:03d}.jpg", quality=90)
    return root
