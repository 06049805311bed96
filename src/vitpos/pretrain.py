"""Pretrain a position encoding on the red-green tasks (thesis §5.1), so any model can start from it.

The thesis pretrains the learnable Fourier PE on ``direction4`` (left/right x above/below) and
then on ``distance`` ((dx, dy) regression), one after the other, to give it the relative-location
bias that the fixed sinusoids have and a fresh Fourier PE lacks. Here each task trains a whole
model with the engine; only the position encoding carries over to the next task (the rest of
the model starts afresh, and its head differs anyway), and the encoding of the last model is
the product, saved with :func:`vitpos.encodings.saved.save_position_encoding`. Linear probes on
the table before and after show what it gained.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .analysis.probes import ProbeResult, probe_table
from .analysis.stages import native_grid
from .analysis.tables import absolute_table
from .config import HostConfig
from .data.synthetic import TASKS as SYNTHETIC_TASKS
from .data.synthetic import SyntheticTask
from .engine.config import TrainConfig
from .engine.train import train
from .files import check_destination
from .models.factory import create_model
from .models.saved_encoding import load_position_encoding, save_position_encoding
from .tasks import task_kind
from .tasks.chance import chance_note

__all__ = ["PRETRAIN_TASKS", "PretrainResult", "pretrain_position_encoding"]

PRETRAIN_TASKS = ("direction4", "distance")


@dataclass
class PretrainResult:
    """The pretrained encoding and what the probes say about it."""

    path: Path
    """The saved encoding."""
    before: ProbeResult
    after: ProbeResult
    test: dict[str, dict[str, float]] = field(default_factory=dict)
    """Test metrics of the model trained on each pretraining task."""
    at_chance: dict[str, str] = field(default_factory=dict)
    """The tasks whose training stayed at chance, each with the sentence that says so."""

    def to_dict(self) -> dict[str, Any]:
        """Plain dict, for JSON."""
        return {
            "path": str(self.path),
            "before": self.before.to_dict(),
            "after": self.after.to_dict(),
            "test": self.test,
            "at_chance": self.at_chance,
        }


def _task_data(task: str, model_cfg: HostConfig, size: int, seed: int) -> SyntheticTask:
    h, w = model_cfg.image_hw
    held_out = max(1, size // 5)
    return SyntheticTask(
        task, img_size=(h, w), square_size=model_cfg.patch_size, train=size, val=held_out, test=held_out, seed=seed
    )


def pretrain_position_encoding(
    model_cfg: HostConfig,
    path: str | Path,
    train_cfg: TrainConfig,
    *,
    size: int = 5000,
    tasks: tuple[str, ...] = PRETRAIN_TASKS,
    probe_folds: int = 10,
) -> PretrainResult:
    """Train ``model_cfg``'s absolute encoding on ``tasks`` in turn and save it to ``path``.

    ``size`` images per task (test and val a fifth of that each); ``train_cfg`` sets epochs,
    batch size, learning rate and the seed (its ``data`` and ``run_dir`` are not used). The
    probes run on the native grid with ``probe_folds`` folds.
    """
    unknown = sorted(set(tasks) - set(SYNTHETIC_TASKS))
    if not tasks or unknown:
        raise ValueError(
            f"pretraining needs one or more synthetic tasks from {', '.join(SYNTHETIC_TASKS)}, got {list(tasks)}"
        )
    check_destination(Path(path), folder=False, force=True)  # a folder or an unwritable place: before training
    torch.manual_seed(train_cfg.seed)
    trained: nn.Module = create_model(model_cfg)  # the trainer builds the same model from this seed
    if train_cfg.init_pe:
        load_position_encoding(trained, train_cfg.init_pe)
    grid = native_grid(trained)
    before = probe_table(absolute_table(trained), grid, folds=probe_folds, seed=train_cfg.seed)
    path = Path(path)
    tests: dict[str, dict[str, float]] = {}
    stuck: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as scratch:
        carried: str | None = train_cfg.init_pe
        for index, task in enumerate(tasks):
            data = _task_data(task, model_cfg, size, train_cfg.seed).splits()
            cfg = model_cfg.replace(num_classes=data.info.num_outputs)
            result = train(cfg, train_cfg.replace(data=f"synthetic:{task}", init_pe=carried, run_dir=None), data)
            tests[task] = result.test
            note = chance_note(result.history, task_kind(data.info.task).headline, data.info.num_outputs)
            if note:
                stuck[task] = note
            carried = str(Path(scratch) / f"after-{index}.safetensors")
            save_position_encoding(result.model, carried)
            trained = result.model
    after = probe_table(absolute_table(trained), grid, folds=probe_folds, seed=train_cfg.seed)
    save_position_encoding(
        trained,
        path,
        tasks=list(tasks),
        images_per_task=size,
        seed=train_cfg.seed,
        probes_before=before.to_dict(),
        probes_after=after.to_dict(),
    )
    return PretrainResult(path, before, after, tests, stuck)
