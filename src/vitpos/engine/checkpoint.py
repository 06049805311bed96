"""Training checkpoints: the model part in the vitpos format (:mod:`vitpos.weights.run_folder`),
the training state for ``torch.load(weights_only=True)``.

A checkpoint folder ``RUN/checkpoints/step-N`` holds ``model.safetensors`` (and
``ema.safetensors``) as :func:`~vitpos.weights.run_folder.write_weights` writes them, and
``state.pt``: optimiser, step, epoch, metric history, ... It is written under a temporary name,
flushed to disk and renamed into place; only then does ``latest`` move to it and are older
checkpoints pruned. A crash at any moment leaves the previous checkpoint whole.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..config import HostConfig
from ..errors import CheckpointError
from ..files import fsync_path, write_atomic
from ..weights.run_folder import (
    CHECKPOINTS,
    EMA_FILE,
    LATEST,
    MODEL_FILE,
    SavedModel,
    find_checkpoint,
    latest_checkpoint,
    read_saved_model,
    write_weights,
)

__all__ = [
    "CheckpointError",
    "Checkpoint",
    "save_checkpoint",
    "latest_checkpoint",
    "find_checkpoint",
    "load_training_checkpoint",
    "check_same_model",
]

STATE_FILE = "state.pt"


@dataclass
class Checkpoint(SavedModel):
    """A loaded training checkpoint."""

    state: dict[str, Any] | None = None
    """Optimiser, step, epoch, history ...; None when loaded for inference only."""


def save_checkpoint(
    run_dir: str | Path,
    step: int,
    model: nn.Module,
    meta: dict[str, Any],
    state: dict[str, Any],
    ema: nn.Module | None = None,
    keep: int = 1,
) -> Path:
    """Write checkpoint ``step-{step}`` atomically, point ``latest`` at it, keep the newest ``keep``."""
    root = Path(run_dir) / CHECKPOINTS
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step:08d}"
    tmp = root / f".{final.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    write_weights(tmp / MODEL_FILE, model.state_dict(), meta)
    if ema is not None:
        write_weights(tmp / EMA_FILE, ema.state_dict(), meta)
    torch.save(state, tmp / STATE_FILE)
    fsync_path(tmp / STATE_FILE)
    fsync_path(tmp)
    if final.exists():  # the same step saved again (a resumed run): swap, then drop the old copy
        old = root / f".{final.name}.old-{os.getpid()}"
        os.replace(final, old)
        os.replace(tmp, final)
        shutil.rmtree(old)
    else:
        os.replace(tmp, final)
    fsync_path(root)
    write_atomic(root / LATEST, final.name + "\n")
    _prune(root, keep, final)
    return final


def _prune(root: Path, keep: int, newest: Path) -> None:
    steps = sorted(p for p in root.glob("step-*") if p.is_dir())
    for old in steps[:-keep]:
        if old != newest:
            shutil.rmtree(old, ignore_errors=True)
    for stale in root.glob(".step-*"):  # left by a process killed mid-write
        shutil.rmtree(stale, ignore_errors=True)


def load_training_checkpoint(path: str | Path, *, with_state: bool = True) -> Checkpoint:
    """Load a checkpoint (see :func:`find_checkpoint` for what ``path`` may be) with its training state."""
    saved = read_saved_model(path)
    folder = saved.path
    state = None
    if with_state:
        try:
            state = torch.load(folder / STATE_FILE, map_location="cpu", weights_only=True)
        except FileNotFoundError:
            raise CheckpointError(f"checkpoint {folder} lacks {STATE_FILE}; it cannot be resumed") from None
        except Exception as err:  # torch raises RuntimeError, EOFError, UnpicklingError ...
            # torch's own message may advise weights_only=False, which would run any code in the file: never pass it on
            raise CheckpointError(
                f"checkpoint file {folder / STATE_FILE} is truncated or corrupt, or holds objects vitpos never writes "
                f"({type(err).__name__}); it is not loaded, since unpickling arbitrary objects could run code. "
                "Restore it from a copy, or resume from another checkpoint"
            ) from None
    return Checkpoint(**vars(saved), state=state)


def _flat_config(cfg: HostConfig) -> dict[str, Any]:
    out = cfg.to_dict()
    out.update(out.pop("position"))
    return out


def check_same_model(saved: HostConfig, wanted: HostConfig, where: Path | str) -> None:
    """Raise :class:`CheckpointError` naming every model field that differs."""
    a, b = _flat_config(saved), _flat_config(wanted)
    diffs = [f"{k}: checkpoint {a[k]!r}, requested {b[k]!r}" for k in a if a[k] != b.get(k)]
    if diffs:
        raise CheckpointError(
            f"checkpoint {where} was written for a different model ({'; '.join(diffs)}); "
            "use the same model options, or start a new run folder"
        )
