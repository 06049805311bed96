"""Run one cell of a study: train with the engine, then measure what the encoding learned."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..analysis.probes import probe_table
from ..analysis.similarity import default_references, similarity_maps
from ..analysis.tables import absolute_table
from ..data.synthetic import SyntheticTask
from ..encodings.saved import load_position_encoding
from ..engine.config import TrainConfig
from ..engine.evaluate import evaluate_resolutions
from ..engine.metrics import primary_metric
from ..engine.train import train
from ..models.factory import create_model
from .cells import Cell
from .families import Family
from .protocol import StudyConfig

__all__ = ["PROBE_TASKS", "SIMILARITY_TASK", "train_config", "run_cell"]

PROBE_TASKS = ("direction", "distance")
"""Thesis Table 2 probes the tables trained on these tasks."""
SIMILARITY_TASK = "absolute_colorshift"
"""Thesis Fig. 5 shows the tables trained on this task."""


def train_config(config: StudyConfig, cell: Cell, *, device: str, init_pe: str | None = None) -> TrainConfig:
    """The engine settings of a cell: the same optimiser steps and warm-up at every training-set size."""
    epochs = config.epochs_for(cell.train_size)
    return TrainConfig(
        data=f"synthetic:{cell.task}", epochs=epochs, batch_size=config.batch_size, lr=config.lr,
        weight_decay=config.weight_decay, warmup_epochs=epochs / 10, seed=cell.seed,
        init_pe=init_pe, device=device, eval_every=epochs, progress=False,
    )


def _score(metrics: dict[str, float], task: str) -> float:
    """The primary metric as a fraction (accuracy) or R²."""
    key = primary_metric(task)
    return metrics[key] / 100.0 if key == "acc1" else metrics[key]


def _initial_model(model_cfg, seed: int, init_pe: str | None) -> nn.Module:
    """The model the trainer starts from (same seed, same construction order)."""
    torch.manual_seed(seed)
    model = create_model(model_cfg)
    if init_pe:
        load_position_encoding(model, init_pe)
    return model.eval()


def run_cell(cell: Cell, family: Family, config: StudyConfig, *, device: str = "cpu", init_pe: str | Path | None = None) -> dict[str, Any]:
    """Train ``cell`` and return its results: test and val metric, and where they apply probes,
    resolution sweep and similarity maps."""
    start = time.perf_counter()
    init_pe = str(init_pe) if init_pe else None
    model_base = config.model
    task = SyntheticTask(
        cell.task, img_size=model_base.image_hw, square_size=model_base.patch_size,
        train=cell.train_size, val=config.val_size, test=config.test_size, seed=cell.seed,
    )
    data = task.splits()
    model_cfg = model_base.replace(**family.model_overrides, num_classes=data.info.num_outputs)
    grid = tuple(model_cfg.grid)
    full = cell.train_size == config.train_size
    probes = family.has_table and full and cell.task in PROBE_TASKS
    similarity = family.has_table and full and cell.task == SIMILARITY_TASK and cell.seed == 0
    before = _initial_model(model_cfg, cell.seed, init_pe) if (probes or similarity) else None

    result = train(model_cfg, train_config(config, cell, device=device, init_pe=init_pe), data)
    model = result.model.cpu()
    kind = data.info.task
    out: dict[str, Any] = {
        "family": family.to_dict(),
        "metric": "accuracy" if kind == "classification" else "r2",
        "test": _score(result.test, kind),
        "val": _score({k[4:]: v for k, v in result.history[-1].items() if k.startswith("val_")}, kind),
    }
    if probes:
        out["probes"] = {
            stage: probe_table(absolute_table(m), grid, folds=config.probe_folds, seed=cell.seed).to_dict()
            for stage, m in (("before", before), ("after", model))
        }
    if cell.task == "direction" and full and config.resolutions:
        sweep = evaluate_resolutions(model, data.test, config.resolutions, batch_size=256, device="cpu")
        out["resolution"] = {str(hw[0]): _score(metrics, kind) for hw, metrics in sweep.items()}
    if similarity:
        refs = default_references(grid)
        out["similarity"] = {
            "references": [list(r) for r in refs],
            **{stage: similarity_maps(absolute_table(m), grid, refs).tolist() for stage, m in (("before", before), ("after", model))},
        }
    out["seconds"] = time.perf_counter() - start
    return out
