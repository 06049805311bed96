"""Data the pages' commands read, written by a block's ``setup=``: ``python -m tests.docs.files KIND=PATH ...``."""

import argparse
from pathlib import Path

import torch
from PIL import Image

from ..data.test_cifar import make_cifar
from ..photos import SAMPLE_PHOTOS, photo_folder
from ..weights import layouts
from ..weights.test_full_size import released_state


def image_folder(path: Path) -> None:
    """``PATH/train`` and ``PATH/val``, four classes of photograph crops: ImageNet's layout, in miniature."""
    photo_folder(path, per_class=8, held=2)


def imagenet_val(path: Path, classes: int = 1000, side: int = 32) -> None:
    """ImageNet's validation folder in miniature: 1,000 class folders of one small photograph crop each."""
    with Image.open(SAMPLE_PHOTOS / "china.jpg") as img:
        photo = img.convert("RGB")
    columns = photo.width // side
    for c in range(classes):
        folder = path / f"n{c:08d}"
        folder.mkdir(parents=True, exist_ok=True)
        x, y = (c % columns) * side, (c // columns) * side % (photo.height - side)
        photo.crop((x, y, x + side, y + side)).save(folder / "0.jpg", quality=90)


def cifar10(path: Path) -> None:
    """CIFAR-10's python batches, six random images each, in the official layout under ``PATH``."""
    make_cifar(path)


def _shapes(preset: str) -> dict:
    """The keys and shapes (meta tensors) of the file the authors released for ``preset``."""
    if "distilled" in preset:
        dim = {"tiny": 192, "small": 384}[preset.split("_")[1]]
        return layouts.deit_distilled(layouts.Filler(meta=True), dim, 12, 16, 14, 1000)
    return released_state(preset)


def released(preset: str, path: Path) -> None:
    """The authors' file for ``preset`` (their layout's keys and shapes, random weights) at ``path``."""
    gen = torch.Generator().manual_seed(0)
    state = {}
    for key, shaped in _shapes(preset).items():
        if key.endswith("relative_position_index"):
            state[key] = layouts.swin_index(7)
        else:
            state[key] = torch.randn(shaped.shape, generator=gen) * 0.02
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model": state}, path)


KINDS = {"image-folder": image_folder, "imagenet-val": imagenet_val, "cifar10": cifar10}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "files", nargs="+", metavar="KIND=PATH", help=f"KIND: {', '.join(KINDS)}, or a preset (the authors' file)"
    )
    for item in parser.parse_args().files:
        kind, _, path = item.partition("=")
        if kind in KINDS:
            KINDS[kind](Path(path))
        else:
            released(kind, Path(path))


if __name__ == "__main__":
    main()
