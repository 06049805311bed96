"""What a run prints before its first step, as timm's and DeiT's ``train.py`` do: the model and
its size, device and precision, the data per split, where each setting came from, the run
folder and the resume point. The same facts go into ``config.yaml`` (as comments) and ``summary.json``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..config import HostConfig
from ..data.dataset import SPLITS, DataSplits
from .config import TrainConfig
from .precision import Precision

__all__ = ["run_facts", "preamble_lines"]


def _images(data: DataSplits) -> dict[str, int | None]:
    """Images per split, by the names the data set gives them (None where a stream has no length)."""
    counts: dict[str, int | None] = {}
    for split in SPLITS:
        if split == "test" and (data.test_name == "val" or data.test is data.val):
            continue  # the val split, evaluated again at the end
        name = data.test_name if split == "test" else split
        try:
            counts[name] = len(data.split(split))
        except TypeError:
            counts[name] = None
    return counts


def run_facts(
    *,
    name: str | None,
    model: nn.Module,
    model_cfg: HostConfig,
    cfg: TrainConfig,
    data: DataSplits,
    device: torch.device,
    precision: Precision,
    origins: Mapping[str, str],
    run_dir: Path | None,
    resumed: dict[str, Any] | None,
) -> dict[str, Any]:
    """The facts of one run, for :func:`preamble_lines` and ``summary.json``.

    ``origins`` names where each setting given by a layer came from (``recipe deit``, ``config
    FILE``, ``command line``); every other setting is its default. ``resumed`` holds the
    checkpoint, epoch and step a resumed run continues from (None: a new run).
    """
    info = data.info
    given = {**model_cfg.to_dict(), **model_cfg.position.to_dict(), **cfg.to_dict()}
    settings: dict[str, dict[str, Any]] = {}
    for key, origin in origins.items():
        settings.setdefault(origin, {})[key] = given.get(key)
    outputs = (
        f"{len(info.target_names)} regression targets" if info.task == "regression" else f"{len(info.classes)} classes"
    )
    return {
        "model": f"{name or 'a ' + model_cfg.arch + ' model'} ({model_cfg.arch} host, "
        f"{model_cfg.image_hw[0]}x{model_cfg.image_hw[1]} images, {model_cfg.num_classes} outputs)",
        "params": sum(p.numel() for p in model.parameters()),
        "device": str(device),
        "precision": f"autocast {str(precision.dtype).removeprefix('torch.')}" if precision.enabled else "float32",
        "data": {
            "spec": info.spec,
            "task": info.task,
            "outputs": outputs,
            "images": _images(data),
            "made": data.made or "splits as the data set comes",
            "evaluated": data.test_name,
        },
        "settings": settings,
        "run_dir": str(run_dir) if run_dir else None,
        "resumed": resumed,
    }


def preamble_lines(facts: dict[str, Any], epochs: int) -> list[str]:
    """The lines printed before the first step."""
    data = facts["data"]
    images = " / ".join(f"{name} {'?' if n is None else f'{n:,}'}" for name, n in data["images"].items())
    recipe = next((o.removeprefix("recipe ") for o in facts["settings"] if o.startswith("recipe ")), "none")
    settings = "; ".join(
        f"from {origin}: " + ", ".join(f"{k}={v}" for k, v in values.items())
        for origin, values in facts["settings"].items()
    )
    resumed = facts["resumed"]
    start = (
        f"resuming {resumed['checkpoint']} at epoch {resumed['epoch']}, step {resumed['step']}"
        if resumed
        else "a new run from step 0"
    )
    return [
        f"model      {facts['model']}: {facts['params']:,} parameters",
        f"device     {facts['device']}, {facts['precision']}",
        f"data       {data['spec']} ({data['task']}, {data['outputs']}): {images} images; {data['made']}",
        f"settings   recipe {recipe}; {settings or 'none given'}; every other at its default",
        f"run        {facts['run_dir'] or 'no folder (nothing is saved)'}; {start}, epochs {epochs}; "
        f"the final evaluation reads the {data['evaluated']} split",
    ]
