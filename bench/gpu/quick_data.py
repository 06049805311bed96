"""Parts (v) and (vi) of ``python -m bench.gpu --quick``: the data pipeline on the device.

(v) the DeiT recipe's device-side augmentation alone, in images/s beside the training step's;
(vi) ``vitpos train --recipe deit`` as run on a generated JPEG folder and on ``wds:`` shards of it
(decode and crop in one loading worker per core, augmentation, step), against the bare step and
each part alone, with a line saying where the time goes (:mod:`bench.data.pipeline`). On CUDA the
runs are timed with and without the opt-in side stream of :mod:`vitpos.engine.prefetch`.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from ..cases import BASELINE
from ..data.pipeline import RunShape, measure, where_time_goes
from ..gpu_steps import synchronize
from ..quick_log import Budget, RowLog, skip, spent
from ..quick_settings import QuickSettings
from ..timing import image_side, interleaved_throughput

DATA_STEPS = 6
"""Training steps of each end-to-end run (the generated folder holds batch x steps images)."""


def augment_rows(s: QuickSettings, budget: Budget, log: RowLog, train_rates: dict[int, float]) -> None:
    """Part (v): the DeiT recipe's device-side augmentation (RandAugment, normalisation, erasing,
    mixup / cutmix) in images/s, beside the no-PE training step's rate at the first token count."""
    from vitpos.data.dataset import DataInfo
    from vitpos.engine.config import TrainConfig
    from vitpos.engine.pipeline import build_augment
    from vitpos.engine.recipes import get_recipe

    part, tokens = "augment", s.tokens[0]
    if spent(budget, log, part, "the DeiT recipe's augmentation"):
        return
    recipe = TrainConfig.from_dict(dict(get_recipe("deit").train))
    info = DataInfo("bench", "classification", classes=tuple(str(i) for i in range(1000)), photographic=True)
    try:
        augment = build_augment(recipe, info)
    except ImportError as err:  # RandAugment is built from kornia's operations
        return skip(log, budget, part, "the DeiT recipe's augmentation", f"{err} (pip install kornia)")
    augment = dataclasses.replace(augment, crop_scale=None, hflip=0.0)  # done per image, in the workers
    side = image_side(s.model, tokens)
    images = torch.randint(0, 256, (s.batch, 3, side, side), dtype=torch.uint8, device=s.device)
    labels = torch.randint(0, 1000, (s.batch,), device=s.device)

    def run() -> None:
        augment(images, labels)
        synchronize(s.device)

    rate = interleaved_throughput({"augment": run}, s.batch, warmup=1, repeats=s.repeats, iters=s.iters)["augment"]
    recipe_text = (
        f"DeiT recipe: RandAugment {recipe.randaugment}, erasing {recipe.random_erasing}, "
        f"mixup {recipe.mixup} / cutmix {recipe.cutmix}, normalisation"
    )
    row: dict[str, Any] = {"part": part, "case": recipe_text}
    row |= {"side": side, "batch": s.batch, "images_per_s": rate.median, "low": rate.low, "high": rate.high}
    row |= {
        "train_step_images_per_s": train_rates.get(tokens),
        "train_step": f"{s.model} {BASELINE.label}, {tokens} tokens",
    }
    log.add(row)
    train = train_rates.get(tokens)
    budget.progress(
        f"{part}: {rate.median:.0f} img/s; training step: "
        + ("not measured" if train is None else f"{train:.0f} img/s")
    )
    return None


def data_rows(s: QuickSettings, budget: Budget, log: RowLog) -> None:
    """Part (vi): the DeiT recipe as run on a JPEG folder and its shards against the bare step, one row per
    rate and one saying where the time goes."""
    part = "data"
    if spent(budget, log, part, "the DeiT recipe end to end"):
        return
    cpu = s.device.type == "cpu"
    shape = RunShape(
        s.device,
        model=s.model,
        model_args=s.model_args,
        batch=min(s.batch, 128),
        steps=DATA_STEPS,
        workers=0 if cpu else min(16, os.cpu_count() or 1),  # no worker processes in the CPU smoke test
        side=image_side(s.model, s.tokens[0]),
    )
    head = {"part": part, "model": s.model, "batch": shape.batch, "steps": shape.steps, "workers": shape.workers}
    rates: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, rate in measure(shape, Path(tmp), lambda name: not spent(budget, log, part, name)):
            rates[name] = rate
            log.add({**head, "case": name, "images_per_s": rate})  # written at once: a call cut short keeps it
            budget.progress(f"{part}: {name}: {rate:.0f} img/s")
    if rates:
        log.add({**head, "case": "where the time goes", "summary": where_time_goes(rates)})
