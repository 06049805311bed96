"""Checkpoints: weights in safetensors, training state for ``torch.load(weights_only=True)``.

Layout of a run folder::

    RUN/checkpoints/latest               name of the newest complete checkpoint
    RUN/checkpoints/step-00001200/
        model.safetensors                weights; metadata: model, training and data configs
        ema.safetensors                  EMA weights (when EMA is on)
        state.pt                         optimiser, step, epoch, metric history, ...

A checkpoint folder is written under a temporary name, flushed to disk and renamed into place;
only then does ``latest`` move to it and are older checkpoints pruned. A crash at any moment
leaves the previous checkpoint whole.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, safe_open, save_file
from torch import nn

from ..config import HostConfig
from ..errors import VitposError
from ..models.factory import config_from_dict, create_model
from ..models.vit import upgrade_state_dict
from .atomic import fsync_path, write_atomic

__all__ = [
    "CheckpointError",
    "Checkpoint",
    "save_checkpoint",
    "latest_checkpoint",
    "find_checkpoint",
    "load_checkpoint",
    "check_same_model",
    "load_weights",
    "load_model",
]

FORMAT = "vitpos-checkpoint-2"
"""Written since the plain ViT became a pyramid of one stage (its parameters under ``stages.0``)."""
FORMATS = ("vitpos-checkpoint-1", FORMAT)
"""Formats read: version 1 holds the ViT's earlier names, which :func:`load_weights` renames."""
CHECKPOINTS, LATEST = "checkpoints", "latest"
MODEL_FILE, EMA_FILE, STATE_FILE = "model.safetensors", "ema.safetensors", "state.pt"


class CheckpointError(VitposError):
    """A checkpoint that is missing, corrupt, or does not fit the model asked for."""


@dataclass
class Checkpoint:
    """A loaded checkpoint."""

    path: Path
    model_config: HostConfig
    train_config: dict[str, Any]
    data: dict[str, Any]
    """The data set it was trained on: spec, task, classes, target_names, mean, std, ..."""
    weights: dict[str, torch.Tensor]
    ema: dict[str, torch.Tensor] | None
    state: dict[str, Any] | None
    """Optimiser, step, epoch, history ...; None when loaded for inference only."""

    @property
    def step(self) -> int:
        """Optimiser steps taken when it was written."""
        return int(self.path.name.split("-")[-1])


def _state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}


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
    metadata = {"format": FORMAT, **{k: json.dumps(v) for k, v in meta.items()}}
    save_file(_state_dict(model), tmp / MODEL_FILE, metadata=metadata)
    if ema is not None:
        save_file(_state_dict(ema), tmp / EMA_FILE, metadata=metadata)
    torch.save(state, tmp / STATE_FILE)
    for name in os.listdir(tmp):
        fsync_path(tmp / name)
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


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest complete checkpoint of a run folder, or None."""
    root = Path(run_dir) / CHECKPOINTS
    pointer = root / LATEST
    if pointer.is_file():
        named = root / pointer.read_text().strip()
        if (named / MODEL_FILE).is_file():
            return named
    complete = sorted(p for p in root.glob("step-*") if (p / MODEL_FILE).is_file())
    return complete[-1] if complete else None


def find_checkpoint(path: str | Path) -> Path:
    """A checkpoint folder from a run folder, a checkpoint folder or its ``model.safetensors``."""
    path = Path(path)
    if path.is_file() and path.name in (MODEL_FILE, EMA_FILE):
        return path.parent
    if (path / MODEL_FILE).is_file():
        return path
    found = latest_checkpoint(path)
    if found is None:
        if not path.exists():
            raise CheckpointError(f"checkpoint {path} does not exist")
        raise CheckpointError(f"{path} holds no checkpoint (expected {CHECKPOINTS}/step-*/{MODEL_FILE})")
    return found


def _read_weights(file: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    try:
        with safe_open(str(file), framework="pt") as f:
            meta = f.metadata() or {}
        return load_file(str(file)), meta
    except (SafetensorError, OSError, ValueError) as err:
        raise CheckpointError(
            f"checkpoint file {file} is truncated or corrupt ({err}); it cannot be loaded. "
            "Restore it, or resume from another checkpoint"
        ) from None


def load_checkpoint(path: str | Path, *, with_state: bool = True) -> Checkpoint:
    """Load a checkpoint (see :func:`find_checkpoint` for what ``path`` may be)."""
    folder = find_checkpoint(path)
    weights, meta = _read_weights(folder / MODEL_FILE)
    if meta.get("format") not in FORMATS:
        raise CheckpointError(f"{folder / MODEL_FILE} is not a vitpos checkpoint (format {meta.get('format')!r})")
    ema = _read_weights(folder / EMA_FILE)[0] if (folder / EMA_FILE).is_file() else None
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
    return Checkpoint(
        path=folder,
        model_config=_model_config(meta, folder / MODEL_FILE),
        train_config=_metadata(meta, "train_config", folder / MODEL_FILE, {}),
        data=_metadata(meta, "data", folder / MODEL_FILE, {}),
        weights=weights,
        ema=ema,
        state=state,
    )


def _metadata(meta: dict[str, str], key: str, file: Path, default: Any = None) -> Any:
    """The JSON value stored under ``key`` in a checkpoint's metadata; a named error if unreadable."""
    if key not in meta:
        if default is not None:
            return default
        raise CheckpointError(
            f"checkpoint file {file} lacks the {key!r} entry in its metadata; it was not written by vitpos train"
        )
    try:
        return json.loads(meta[key])
    except json.JSONDecodeError as err:
        raise CheckpointError(
            f"checkpoint file {file}: the {key!r} entry of its metadata is not valid JSON ({err}); the file was edited "
            "or damaged: restore it from a copy"
        ) from None


def _model_config(meta: dict[str, str], file: Path) -> HostConfig:
    data = _metadata(meta, "model_config", file)
    try:
        return config_from_dict(data)
    except (VitposError, TypeError) as err:
        raise CheckpointError(f"checkpoint file {file}: its model_config metadata is invalid ({err})") from None


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


def load_weights(model: nn.Module, weights: dict[str, torch.Tensor], where: Path | str) -> None:
    """Load ``weights`` into ``model``; missing, extra or mis-shaped tensors are a named error.

    A plain ViT's earlier parameter names (checkpoint format 1) are renamed first."""
    weights = upgrade_state_dict(weights)
    own = model.state_dict()
    problems = [f"missing {k}" for k in own if k not in weights]
    problems += [f"unexpected {k}" for k in weights if k not in own]
    problems += [
        f"{k} has shape {tuple(weights[k].shape)} in the checkpoint, {tuple(v.shape)} in the model"
        for k, v in own.items()
        if k in weights and weights[k].shape != v.shape
    ]
    if problems:
        shown = "; ".join(problems[:6]) + (f"; and {len(problems) - 6} more" if len(problems) > 6 else "")
        raise CheckpointError(f"checkpoint {where} does not fit this model: {shown}")
    model.load_state_dict(weights)


def load_model(
    path: str | Path, *, ema: bool = False, device: torch.device | str = "cpu"
) -> tuple[nn.Module, Checkpoint]:
    """Rebuild the model a checkpoint was trained with and load its (EMA) weights; eval mode."""
    ckpt = load_checkpoint(path, with_state=False)
    weights = ckpt.ema if ema else ckpt.weights
    if weights is None:
        raise CheckpointError(f"checkpoint {ckpt.path} has no EMA weights (trained with ema_decay=0)")
    model = create_model(ckpt.model_config)
    load_weights(model, weights, ckpt.path)
    return model.to(device).eval(), ckpt
