"""``vitpos demo``: train a tiny ViT with each absolute encoding on a toy location task."""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from ..models.factory import create_model
from ..registry import ABSOLUTE


def quadrant_batch(n: int, size: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Black images with one bright 4x4 square; the label is the quadrant it lies in."""
    images = torch.zeros(n, 3, size, size)
    ys = torch.randint(0, size - 4, (n,), generator=generator)
    xs = torch.randint(0, size - 4, (n,), generator=generator)
    for i, (y, x) in enumerate(zip(ys.tolist(), xs.tolist())):
        images[i, :, y : y + 4, x : x + 4] = 1.0
    labels = 2 * (ys + 2 >= size // 2).long() + (xs + 2 >= size // 2).long()
    return images, labels


def run(args: argparse.Namespace) -> int:
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    test_images, test_labels = quadrant_batch(256, 32, gen)
    big_images, big_labels = quadrant_batch(256, 48, gen)
    print(f"{'absolute':18s} {'acc@32':>7s} {'acc@48':>7s} {'time':>6s}")
    for name in ABSOLUTE.names():
        model = create_model(
            "vit_lite_7_4", absolute=name, depth=2, embed_dim=64, num_heads=2, num_classes=4
        )
        opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
        start = time.perf_counter()
        model.train()
        for _ in range(args.steps):
            images, labels = quadrant_batch(64, 32, gen)
            loss = F.cross_entropy(model(images), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            acc = (model(test_images).argmax(-1) == test_labels).float().mean().item()
            acc_big = (model(big_images).argmax(-1) == big_labels).float().mean().item()
        print(f"{name:18s} {acc:7.3f} {acc_big:7.3f} {time.perf_counter() - start:5.1f}s")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="train tiny ViTs on a toy location task", description=__doc__)
    p.add_argument("--steps", type=int, default=150, help="training steps per encoding")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=run)
