"""Throughput by interleaved repeated timing, and peak tensor memory of a training step."""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

import vitpos

from .memory import PeakTensorMemory


@dataclass
class Timing:
    """A quantity over repeated timings (images/s, or an overhead): median and spread (min, max)."""

    median: float
    low: float
    high: float


def image_side(model_name: str, tokens: int) -> int:
    """The square image size that gives ``tokens`` patch tokens for ``model_name`` (for a
    pyramid: tokens of the last stage, so 49 tokens are 224 x 224 for a stride of 32)."""
    cfg = vitpos.get_config(model_name)
    side = math.isqrt(tokens)
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


def _time(fn: Callable[[], None], iters: int) -> float:
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    return time.perf_counter() - start


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
            samples[key].append(batch * iters / _time(steps[key], iters))
    return {k: _summary(v) for k, v in samples.items()}


def paired_overheads(
    steps: dict[str, Callable[[], None]],
    baseline: str,
    batch: int,
    *,
    warmup: int,
    repeats: int,
    iters: int,
    seed: int = 0,
) -> tuple[dict[str, Timing], dict[str, Timing]]:
    """Throughput of every case (images/s) and its overhead against ``baseline``, from paired timings.

    Each round times the cases in shuffled order with the baseline between every two of them
    (B c1 B c2 ... cn B); a case's overhead in that round is its time over the mean of the two
    baseline timings beside it, minus one. Pairing neighbours cancels the slow drift of a shared
    machine that a ratio of two medians keeps. Overheads: median over rounds and (min, max).
    """
    for fn in steps.values():
        for _ in range(warmup):
            fn()
    others = [k for k in steps if k != baseline]
    seconds: dict[str, list[float]] = {k: [] for k in steps}
    ratios: dict[str, list[float]] = {k: [] for k in others}
    rng = random.Random(seed)
    for _ in range(repeats):
        rng.shuffle(others)
        before = _time(steps[baseline], iters)
        seconds[baseline].append(before)
        for key in others:
            t = _time(steps[key], iters)
            after = _time(steps[baseline], iters)
            seconds[key].append(t)
            seconds[baseline].append(after)
            ratios[key].append(2 * t / (before + after) - 1.0)
            before = after
    throughput = {k: _summary([batch * iters / t for t in v]) for k, v in seconds.items()}
    overheads = {k: _summary(v) for k, v in ratios.items()} | {baseline: Timing(0.0, 0.0, 0.0)}
    return throughput, overheads


def _summary(values: list[float]) -> Timing:
    return Timing(statistics.median(values), min(values), max(values))


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
