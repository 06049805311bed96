"""The DeiT recipe's training as run, end to end, against its parts: a small generated JPEG folder and
``wds:`` shards of it, decoded and cropped in the loading workers, augmented on the device, trained.

Shared by ``python -m bench.data`` (CPU) and part "data" of ``python -m bench.gpu --quick``. Each
rate is images per second of wall time: ``vitpos train --recipe deit`` as the command runs it (one
epoch; its own images/s over the training loop), the loading alone (the same batches, no step),
the device-side augmentation alone and the bare training step (forward, backward, AdamW on a batch
already on the device, in the run's precision).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

import vitpos
from vitpos.cli import main as vitpos_main
from vitpos.data.catalog import open_data
from vitpos.data.dataset import DataSplits
from vitpos.data.transforms import smooth_one_hot
from vitpos.engine.config import TrainConfig
from vitpos.engine.distributed import Dist
from vitpos.engine.pipeline import TrainData
from vitpos.engine.prefetch import SIDE_STREAM_ENV
from vitpos.engine.recipes import get_recipe

from ..gpu_steps import synchronize

PHOTOS = Path(__import__("sklearn.datasets").datasets.__file__).parent / "images"
"""scikit-learn's two sample photographs (640 x 427 JPEG), cut into the generated folder's images."""


@dataclass(frozen=True)
class RunShape:
    """What the end-to-end runs train: model, batch, steps, loading workers, device."""

    device: torch.device
    model: str = "deit_tiny_patch16_224"
    model_args: dict[str, int] = field(default_factory=dict)
    """Overrides of the preset (e.g. depth=2 to keep a CPU run short)."""
    batch: int = 32
    steps: int = 8
    """Training steps per run (the folder holds ``batch * steps`` training images)."""
    workers: int = 2
    classes: int = 4
    side: int = 224


def jpeg_folder(root: Path, images: int, classes: int, seed: int = 0) -> Path:
    """``root`` with train/ and val/ class folders of JPEGs (about 500 x 375, quality 90) cut from the photographs."""
    rng = np.random.default_rng(seed)
    photos = [Image.open(p).convert("RGB") for p in sorted(PHOTOS.glob("*.jpg"))]
    for split, count in (("train", images), ("val", 2 * classes)):
        for i in range(count):
            photo = photos[i % len(photos)]
            w, h = int(rng.integers(400, photo.width)), int(rng.integers(300, photo.height))
            left, top = int(rng.integers(0, photo.width - w + 1)), int(rng.integers(0, photo.height - h + 1))
            folder = root / split / f"class{i % classes}"
            folder.mkdir(parents=True, exist_ok=True)
            photo.crop((left, top, left + w, top + h)).save(folder / f"{i:05d}.jpg", "JPEG", quality=90)
    return root


def shards_of(folder: Path, out: Path, per_shard: int) -> str:
    """``vitpos shard`` of ``folder`` into ``out``, ``per_shard`` images a shard; the ``wds:`` spec it prints."""
    text = io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.redirect_stderr(io.StringIO()):
        vitpos_main(["shard", f"folder:{folder}", str(out), "--per-shard", str(per_shard), "--no-shuffle"])
    found = re.search(r"--data '([^']+)'", text.getvalue())
    if found is None:
        raise RuntimeError(f"vitpos shard printed no data spec: {text.getvalue()[-300:]}")
    return found.group(1)


def _recipe(shape: RunShape, spec: str) -> TrainConfig:
    cfg = TrainConfig.from_dict(dict(get_recipe("deit").train))
    return cfg.replace(data=spec, batch_size=shape.batch, workers=shape.workers, device=str(shape.device), epochs=1)


def as_run(shape: RunShape, spec: str, run_dir: Path) -> float:
    """Images/s of ``vitpos train --recipe deit`` on ``spec`` (one epoch, the command's own training-loop rate)."""
    args = ["train", "--recipe", "deit", "--model", shape.model, "--data", spec, "--epochs", "1"]
    args += ["--batch-size", str(shape.batch), "--workers", str(shape.workers), "--device", str(shape.device)]
    args += ["--warmup-epochs", "0", "--num-classes", str(shape.classes), "--img-size", str(shape.side)]
    args += ["--run-dir", str(run_dir), "--no-progress"]
    for name, value in shape.model_args.items():
        args += [f"--{name.replace('_', '-')}", str(value)]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        vitpos_main(args)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return float(rows[-1]["images_per_s"])


def _train_data(shape: RunShape, spec: str) -> tuple[TrainData, DataSplits]:
    data = open_data(spec)
    cfg = _recipe(shape, spec)
    pin = shape.device.type == "cuda"
    return TrainData(data, cfg, (shape.side, shape.side), Dist(), pin_memory=pin), data


def loading_rate(shape: RunShape, spec: str) -> float:
    """Images/s of the run's host batches alone (decode and crop in the loading workers), first batch included."""
    train, _ = _train_data(shape, spec)
    start, seen = time.perf_counter(), 0
    for images, _labels in train.batches(0):
        seen += len(images)
    return seen / (time.perf_counter() - start)


def _timed(fn: Callable[[], None], items: int, repeats: int) -> float:
    """Median items/s of ``fn`` over ``repeats`` calls after one warm-up call."""
    fn()
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        rates.append(items / (time.perf_counter() - start))
    return float(np.median(rates))


def augment_rate(shape: RunShape, spec: str, repeats: int = 3) -> float:
    """Images/s of the run's device-side augmentation on uint8 batches already on the device."""
    train, _ = _train_data(shape, spec)
    images = torch.randint(0, 256, (shape.batch, 3, shape.side, shape.side), dtype=torch.uint8, device=shape.device)
    labels = torch.randint(0, shape.classes, (shape.batch,), device=shape.device)

    def run() -> None:
        train.augment(images, labels)
        synchronize(shape.device)

    return _timed(run, shape.batch, repeats)


def step_rate(shape: RunShape, repeats: int = 3) -> float:
    """Images/s of the bare training step: forward, soft-target loss, backward, AdamW, in the run's precision
    (bf16 autocast on CUDA, float32 on the CPU) on a batch already on the device."""
    model = vitpos.create_model(shape.model, num_classes=shape.classes, img_size=shape.side, **shape.model_args)
    model = model.to(shape.device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(shape.batch, 3, shape.side, shape.side, device=shape.device)
    soft = smooth_one_hot(torch.randint(0, shape.classes, (shape.batch,), device=shape.device), shape.classes, 0.1)

    def run() -> None:
        with torch.autocast(shape.device.type, dtype=torch.bfloat16, enabled=shape.device.type == "cuda"):
            logits = model(x)
        loss = -(soft * F.log_softmax(logits.float(), dim=-1)).sum(-1).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        synchronize(shape.device)

    return _timed(run, shape.batch, repeats)


def where_time_goes(rates: dict[str, float]) -> str:
    """One line: the end-to-end rates as shares of the bare step's, and what bounds them."""
    step = rates.get("bare step")
    if step is None:
        return "Where the time goes: not measured (the bare step was not timed)."
    parts = {k: v for k, v in rates.items() if k in ("loading (folder)", "augmentation", "bare step")}
    slowest = min(parts, key=parts.__getitem__)
    serial = 1 / sum(1 / v for v in parts.values())
    ends = ", ".join(
        f"{k} {v:.0f} images/s ({v / step:.0%} of the bare step)" for k, v in rates.items() if "as run" in k
    )
    return (
        f"Where the time goes: {ends}. Alone, per image: "
        + ", ".join(f"{k} {1000 / v:.1f} ms" for k, v in parts.items())
        + f"; the slowest part is {slowest}; done one after another with no overlap they would give {serial:.0f} "
        "images/s."
    )


def _with_side_stream(fn: Callable[[], float]) -> float:
    """``fn()`` with the opt-in side stream of :mod:`vitpos.engine.prefetch` switched on."""
    before = os.environ.get(SIDE_STREAM_ENV)
    os.environ[SIDE_STREAM_ENV] = "1"
    try:
        return fn()
    finally:
        if before is None:
            del os.environ[SIDE_STREAM_ENV]
        else:
            os.environ[SIDE_STREAM_ENV] = before


def measure(shape: RunShape, root: Path, go_on: Callable[[str], bool] = lambda _: True) -> Iterator[tuple[str, float]]:
    """Each rate of the end-to-end comparison as it is measured, on a folder and its shards written under
    ``root``; before each, ``go_on(name)`` may stop the rest (a spent time budget). On CUDA the runs are
    timed also with the side stream."""
    folder = jpeg_folder(root / "jpegs", shape.batch * shape.steps, shape.classes)
    shards = shards_of(folder, root / "shards", max(1, shape.batch * shape.steps // (2 * max(shape.workers, 1))))
    parts: dict[str, Callable[[], float]] = {
        "bare step": lambda: step_rate(shape),
        "as run (folder)": lambda: as_run(shape, f"folder:{folder}", root / "run-folder"),
        "as run (shards)": lambda: as_run(shape, shards, root / "run-shards"),
        "augmentation": lambda: augment_rate(shape, f"folder:{folder}"),
        "loading (folder)": lambda: loading_rate(shape, f"folder:{folder}"),
        "loading (shards)": lambda: loading_rate(shape, shards),
    }
    if shape.device.type == "cuda":
        parts["as run (folder), side stream"] = lambda: _with_side_stream(
            lambda: as_run(shape, f"folder:{folder}", root / "run-folder-side")
        )
        parts["as run (shards), side stream"] = lambda: _with_side_stream(
            lambda: as_run(shape, shards, root / "run-shards-side")
        )
    for name, measure_one in parts.items():
        if not go_on(name):
            return
        yield name, measure_one()
