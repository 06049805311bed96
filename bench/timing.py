"""Throughput by interleaved repeated timing, and peak tensor memory of a training step."""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

import vitpos

from .memory import PeakTensorMemory


@dataclass
class Timing:
    """Images per second over repeated timings: median and spread (min, max)."""

    median: float
    low: float
    high: float


def image_side(model_name: str, tokens: int) -> int:
    """The square image size that gives ``tokens`` patch tokens for ``model_name`` (for a
    pyramid: tokens of the last stage, so 49 tokens are 224 x 224 for a stride of 32)."""
    cfg = vitpos.get_config(model_name)
    side = int(round(tokens**0.5))
    if side * side != tokens:
        raise ValueError(f"{tokens} tokens is not a square grid")
    return side * (cfg.stride if isinstance(cfg, vitpos.PyramidConfig) else cfg.patch_size)


def build(model_name: str, slots: dict, tokens: int) -> torch.nn.Module:
    """The benchmarked model, built for the grid it runs at."""
    return vitpos.create_model(model_name, img_size=image_side(model_name, tokens), **slots)


def step_fn(model: torch.nn.Module, images: torch.Tensor, mode: str) -> Callable[[], None]:
    """One inference forward, or one training step (forward, backward, AdamW step)."""
    labels = torch.zeros(images.shape[0], dtype=torch.long)
    if mode == "infer":
        model.eval()

        def infer() -> None:
            with torch.inference_mode():
                model(images)

        return infer
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def train() -> None:
        loss = F.cross_entropy(model(images), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return train


def interleaved_throughput(
    steps: dict[str, Callable[[], None]], batch: int, *, warmup: int, repeats: int, iters: int, seed: int = 0
) -> dict[str, Timing]:
    """Time every step function ``repeats`` times in shuffled round-robin order, so that drift
    in the machine's speed hits every case alike; returns images/s per case."""
    for fn in steps.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {k: [] for k in steps}
    order = list(steps)
    rng = random.Random(seed)
    for _ in range(repeats):
        rng.shuffle(order)
        for key in order:
            start = time.perf_counter()
            for _ in range(iters):
                steps[key]()
            samples[key].append(batch * iters / (time.perf_counter() - start))
    return {k: Timing(statistics.median(v), min(v), max(v)) for k, v in samples.items()}


def peak_memory(model_name: str, slots: dict, tokens: int, batch: int) -> int:
    """Peak bytes of tensor storage allocated by two training steps (activations, saved tensors,
    gradients, optimizer state), counted exactly at the dispatcher."""
    torch.manual_seed(0)
    model = build(model_name, slots, tokens)
    side = image_side(model_name, tokens)
    images = torch.randn(batch, 3, side, side)
    train = step_fn(model, images, "train")
    with PeakTensorMemory() as counter:
        train()
        train()
    return counter.peak
