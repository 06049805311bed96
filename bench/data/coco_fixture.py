"""``python -m bench.data.coco_fixture OUT``: a tiny COCO-format detection folder for trying ``coco:OUT``.

Grey images of varied sizes and aspect ratios (sides 48-112 pixels), each with one to three red
or green squares (categories 1 "red" and 2 "green"), written as PNG files with
``annotations/instances_{train,val}2017.json`` in COCO's layout. Drawn from a seed, so the same
command writes the same folder.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from PIL import Image

__all__ = ["write_coco_fixture"]

COLOURS = {1: (220, 30, 30), 2: (30, 200, 30)}
"""Category id -> RGB of its squares."""


def _split(root: Path, name: str, count: int, rng: np.random.Generator) -> None:
    (root / name).mkdir(parents=True, exist_ok=True)
    images, annotations = [], []
    for image_id in range(1, count + 1):
        h, w = (int(v) for v in rng.integers(48, 113, size=2))
        pixels = np.full((h, w, 3), 128, dtype=np.uint8)
        for _ in range(int(rng.integers(1, 4))):
            side = int(rng.integers(12, min(h, w) // 2 + 1))
            x, y = int(rng.integers(0, w - side + 1)), int(rng.integers(0, h - side + 1))
            category = int(rng.integers(1, 3))
            pixels[y : y + side, x : x + side] = COLOURS[category]
            annotations.append({
                "id": len(annotations) + 1, "image_id": image_id, "category_id": category,
                "bbox": [x, y, side, side], "area": side * side, "iscrowd": 0,
            })  # fmt: skip
        file_name = f"{image_id:06d}.png"
        Image.fromarray(pixels).save(root / name / file_name)
        images.append({"id": image_id, "file_name": file_name, "height": h, "width": w})
    categories = [{"id": c, "name": n} for c, n in ((1, "red"), (2, "green"))]
    data = {"images": images, "annotations": annotations, "categories": categories}
    (root / "annotations").mkdir(exist_ok=True)
    (root / "annotations" / f"instances_{name}.json").write_text(json.dumps(data))


def write_coco_fixture(root: Path, train: int = 16, val: int = 8, seed: int = 0) -> Path:
    """Write ``train`` and ``val`` images with their annotations under ``root``; returns ``root``."""
    rng = np.random.default_rng(seed)
    _split(root, "train2017", train, rng)
    _split(root, "val2017", val, rng)
    return root


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.data.coco_fixture", description=__doc__)
    p.add_argument("out", type=Path, help="the folder to write (coco:OUT reads it)")
    p.add_argument("--train", type=int, default=16, help="training images")
    p.add_argument("--val", type=int, default=8, help="validation images")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    write_coco_fixture(args.out, args.train, args.val, args.seed)
    print(
        f"wrote {args.train} training and {args.val} validation images with their boxes (2 categories: red, green) "
        f"to {args.out}; read it with `--data coco:{args.out}` (detection presets: `vitpos models --task detection`)"
    )


if __name__ == "__main__":
    main()
