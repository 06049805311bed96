"""A COCO-format folder of images of mixed sizes and aspect ratios, shared by the detection tests."""

import numpy as np
import pytest
from PIL import Image

from .test_coco_data import write_split

COLOURS = {3: (255, 0, 0), 18: (0, 255, 0)}  # category id -> colour
SIZES = [(32, 48), (48, 32), (32, 40), (32, 32), (40, 32), (32, 52)]
"""Shorter side 32, longer <= 53: at size 32 no image is resized."""


def scene(rng: np.random.Generator, size: tuple[int, int]) -> tuple[np.ndarray, list[tuple[int, tuple[int, ...]]]]:
    """A black image with a red and/or a green square, and its annotations (category, (x, y, w, h))."""
    h, w = size
    pixels = np.zeros((h, w, 3), dtype=np.uint8)
    objects: list[tuple[int, tuple[int, ...]]] = []
    for cid in COLOURS if rng.random() < 0.5 else [int(rng.choice(list(COLOURS)))]:
        side = int(rng.integers(8, 13))
        for _ in range(50):
            x, y = int(rng.integers(0, w - side + 1)), int(rng.integers(0, h - side + 1))
            if not pixels[y : y + side, x : x + side].any():
                break
        pixels[y : y + side, x : x + side] = COLOURS[cid]
        objects.append((cid, (x, y, side, side)))
    return pixels, objects


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    root = tmp_path_factory.mktemp("coco_mixed")
    rng = np.random.default_rng(5)
    for split, count in (("train2017", 12), ("val2017", 6)):
        images, annotations = [], []
        (root / split).mkdir()
        for i in range(1, count + 1):
            size = SIZES[(i - 1) % len(SIZES)]
            pixels, objects = scene(rng, size)
            Image.fromarray(pixels).save(root / split / f"{i}.png")
            images.append((i, f"{i}.png", *size))
            annotations += [(i, cid, box, 0) for cid, box in objects]
        write_split(root, split, images, annotations)
    return root
