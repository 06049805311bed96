"""The vitpos checkpoint format: weights in safetensors, the resolved configs in their metadata.

Layout of a run folder (``vitpos train``) and of a ``vitpos convert`` folder::

    RUN/config.yaml                      the resolved configs, as a ``--config`` file
    RUN/checkpoints/latest               name of the newest complete checkpoint
    RUN/checkpoints/step-00001200/
        model.safetensors                weights; metadata: format, model, training and data configs
        ema.safetensors                  EMA weights (when EMA is on)
        state.pt                         the training state (:mod:`vitpos.engine.checkpoint`)

A converted model is ``DST/model.safetensors`` (+ ``DST/config.yaml``) with the same metadata and
its data config (:class:`~.data_config.DataConfig`; a run's is derived from its data and training configs).
:func:`saved_config` is the one reader of a model config stored with weights.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, safe_open, save_file

from ..config import HostConfig
from ..errors import CheckpointError, VitposError
from ..files import replacing
from ..models.factory import config_from_dict
from .data_config import DataConfig
from .memory import check_safetensors_fit

__all__ = [
    "CHECKPOINTS",
    "CONFIG_FILE",
    "EMA_FILE",
    "FORMAT",
    "FORMATS",
    "LATEST",
    "MODEL_FILE",
    "SavedModel",
    "find_checkpoint",
    "latest_checkpoint",
    "read_safetensors",
    "read_saved_model",
    "saved_config",
    "write_weights",
]

FORMAT = "vitpos-checkpoint-2"
"""Written since the plain ViT became a pyramid of one stage (its parameters under ``stages.0``)."""
FORMATS = ("vitpos-checkpoint-1", FORMAT)
"""Formats read: version 1 holds the ViT's earlier names, which the native layout renames."""
CHECKPOINTS, LATEST = "checkpoints", "latest"
MODEL_FILE, EMA_FILE, CONFIG_FILE = "model.safetensors", "ema.safetensors", "config.yaml"


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
            raise CheckpointError(f"checkpoint {path} does not exist; check the path")
        raise CheckpointError(f"{path} holds no checkpoint (expected {CHECKPOINTS}/step-*/{MODEL_FILE})")
    return found


def read_safetensors(file: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The tensors of a ``.safetensors`` file and its metadata; a named error if the file is damaged."""
    check_safetensors_fit(file)
    try:
        with safe_open(str(file), framework="pt") as f:
            meta = f.metadata() or {}
        return load_file(str(file)), meta
    except (SafetensorError, OSError, ValueError) as err:
        raise CheckpointError(
            f"checkpoint {file} is truncated or corrupt ({err}); download or copy it again, "
            "or resume from another checkpoint"
        ) from None


def write_weights(file: Path, weights: dict[str, torch.Tensor], metadata: dict[str, Any]) -> None:
    """Write ``weights`` to ``file`` in the vitpos format, the ``metadata`` values as JSON; atomically."""
    tensors = {k: v.detach().contiguous().cpu() for k, v in weights.items()}
    with replacing(file) as tmp:
        save_file(tensors, str(tmp), metadata={"format": FORMAT, **{k: json.dumps(v) for k, v in metadata.items()}})


def _entry(meta: dict[str, str], key: str, file: Path, default: Any = None) -> Any:
    """The JSON value stored under ``key`` in a checkpoint's metadata; a named error if unreadable."""
    if key not in meta:
        if default is not None:
            return default
        raise CheckpointError(
            f"checkpoint file {file} lacks the {key!r} entry in its metadata; it was not written by vitpos"
        )
    try:
        return json.loads(meta[key])
    except json.JSONDecodeError as err:
        raise CheckpointError(
            f"checkpoint file {file}: the {key!r} entry of its metadata is not valid JSON ({err}); the file was edited "
            "or damaged: restore it from a copy"
        ) from None


def saved_config(meta: dict[str, str], file: Path) -> HostConfig | None:
    """The model config stored in a safetensors file's metadata; None if it is not a vitpos checkpoint."""
    if meta.get("format") not in FORMATS:
        return None
    try:
        return config_from_dict(_entry(meta, "model_config", file))
    except (VitposError, TypeError) as err:
        if isinstance(err, CheckpointError):
            raise
        raise CheckpointError(f"checkpoint file {file}: its model_config metadata is invalid ({err})") from None


@dataclass
class SavedModel:
    """A vitpos checkpoint's weights and the configs stored with them."""

    path: Path
    """The checkpoint folder."""
    model_config: HostConfig
    train_config: dict[str, Any]
    data: dict[str, Any]
    """The data set it was trained on: spec, task, classes, target_names, mean, std, ..."""
    weights: dict[str, torch.Tensor]
    ema: dict[str, torch.Tensor] | None
    metadata: dict[str, str]
    """The metadata of ``model.safetensors`` as stored (JSON strings)."""

    @property
    def data_config(self) -> DataConfig:
        """How images are prepared for this model: the one stored, else the run's data and training configs."""
        cfg = self.model_config
        if "data_config" in self.metadata:
            where = f"checkpoint {self.path}"
            stored = DataConfig.from_dict(_entry(self.metadata, "data_config", self.path), where)
            return stored.check_outputs(cfg.num_classes, where)
        return DataConfig.of_run(cfg.image_hw, self.data, self.train_config, cfg.in_chans)

    @property
    def step(self) -> int:
        """Optimiser steps taken when it was written (0 for a converted model)."""
        tail = self.path.name.split("-")[-1]
        return int(tail) if tail.isdigit() else 0


def read_saved_model(path: str | Path) -> SavedModel:
    """The vitpos checkpoint at ``path``: a run folder, a checkpoint folder or its ``model.safetensors``."""
    folder = find_checkpoint(path)
    file = folder / MODEL_FILE
    weights, meta = read_safetensors(file)
    cfg = saved_config(meta, file)
    if cfg is None:
        raise CheckpointError(f"{file} is not a vitpos checkpoint (format {meta.get('format')!r})")
    ema = read_safetensors(folder / EMA_FILE)[0] if (folder / EMA_FILE).is_file() else None
    return SavedModel(
        path=folder,
        model_config=cfg,
        train_config=_entry(meta, "train_config", file, {}),
        data=_entry(meta, "data", file, {}),
        weights=weights,
        ema=ema,
        metadata=meta,
    )
