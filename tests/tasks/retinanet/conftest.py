"""A tiny RetinaNet on the tiny PVT of the shared test settings, and images with boxes to learn."""

from __future__ import annotations

import torch

from tests.conftest import TINY_PVT
from vitpos.data.objects import ObjectTargets, pad_objects
from vitpos.tasks.retinanet import RetinaNetConfig


def tiny_retinanet(**overrides) -> RetinaNetConfig:
    """RetinaNet (16 channels, one conv per subnet, 2 classes) on the tiny PVT: P3-P7 at strides 4-64."""
    fields = {**TINY_PVT, "arch": "retinanet", "backbone": "pvt", "fpn_dim": 16, "head_convs": 1, "num_classes": 2}
    return RetinaNetConfig(**fields).replace(**overrides)


def square_images(n: int, size: int = 64, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` grey images with one or two red (class 0) or green (class 1) squares of 12-24 pixels, and
    their targets (n, 2, 5) in normalised (cx, cy, w, h)."""
    g = torch.Generator().manual_seed(seed)
    images = torch.full((n, 3, size, size), 0.5)
    objects = []
    for i in range(n):
        labels, boxes = [], []
        for k in range(1 + i % 2):
            side = int(torch.randint(12, 25, (1,), generator=g))
            half = size // 2
            x0 = int(torch.randint(k * half, k * half + half - side, (1,), generator=g))
            y0 = int(torch.randint(0, size - side, (1,), generator=g))
            label = int(torch.randint(0, 2, (1,), generator=g))
            images[i, :, y0 : y0 + side, x0 : x0 + side] = torch.tensor(
                [1.0, 0.0, 0.0] if label == 0 else [0.0, 1.0, 0.0]
            )[:, None, None]
            labels.append(label)
            boxes.append([(x0 + side / 2) / size, (y0 + side / 2) / size, side / size, side / size])
        objects.append(ObjectTargets(torch.tensor(labels), torch.tensor(boxes)))
    return images, pad_objects(objects)
