"""Read a checkpoint file into a flat state dict without running code from it.

``.safetensors`` files are read as they are; anything else goes through
``torch.load(weights_only=True)``, which refuses pickles that would build arbitrary objects
(``argparse.Namespace`` is allowed: the DeiT, iRPE and LaPE training scripts store their
arguments as one, and it holds plain values only). A dict holding the weights under ``model``,
``state_dict_ema``, ``state_dict`` or ``model_ema`` (the first there) is unwrapped, and
DistributedDataParallel's ``module.`` prefix is removed. timm's and T2T-ViT's train scripts save
``state_dict`` and, with EMA on, ``state_dict_ema``; T2T-ViT evaluates the EMA weights, so they
are taken (with a log line naming the entry that picks the others). A vitpos run folder or
checkpoint folder yields its ``model.safetensors`` (entry ``ema``: its ``ema.safetensors``).
"""

from __future__ import annotations

import argparse
import logging
import pickle
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..errors import CheckpointError, plain_text, setting
from .pretrained import resolve_checkpoint
from .run_folder import EMA_FILE, MODEL_FILE, find_checkpoint, read_safetensors

__all__ = ["ENTRIES", "WeightsFile", "read_state_dict", "read_weights"]

ENTRIES = ("model", "state_dict_ema", "state_dict", "model_ema")
"""Where released training checkpoints keep their weights, in the order they are looked for."""

LOG = logging.getLogger("vitpos.weights")


@dataclass
class WeightsFile:
    """The weights of one checkpoint file and what is stored beside them."""

    path: Path
    state: dict[str, torch.Tensor]
    metadata: dict[str, str] = field(default_factory=dict)
    """A safetensors file's metadata (a vitpos checkpoint's configs); empty for a pickle."""
    args: dict[str, Any] = field(default_factory=dict)
    """The training arguments a released training checkpoint stores under ``args``."""
    entry: str | None = None
    """The dict entry the weights were taken from (None: the file is the state dict)."""


def read_weights(path: str | Path, entry: str | None = None) -> WeightsFile:
    """The weights in ``path``; ``entry`` picks one of :data:`ENTRIES` (or ``ema`` of a vitpos folder)."""
    path = resolve_checkpoint(path)
    if path.is_dir():
        if entry not in (None, "model", "ema"):
            raise CheckpointError(
                f"{path} is a vitpos checkpoint folder; its entries are 'model' and 'ema', not {entry!r}"
            )
        path = find_checkpoint(path) / (EMA_FILE if entry == "ema" else MODEL_FILE)
        entry = None
    if not path.is_file():
        raise CheckpointError(
            f"checkpoint {path} does not exist; check the path, or give a URL or a preset with released weights "
            "(`vitpos models --pretrained`)"
        )
    if path.suffix == ".safetensors":
        state, meta = read_safetensors(path)
        return WeightsFile(path, _unwrap(state, path, entry), meta)
    raw = _read_pickle(path)
    args = raw.get("args") if isinstance(raw, dict) else None
    entry = _entry(raw, path, entry)
    stored = vars(args) if isinstance(args, argparse.Namespace) else {}
    return WeightsFile(path, _unwrap(raw, path, entry), args=stored, entry=entry)


def read_state_dict(path: str | Path, entry: str | None = None) -> dict[str, torch.Tensor]:
    """The weights in ``path`` as {name: tensor}; ``entry`` picks one of :data:`ENTRIES` explicitly."""
    return read_weights(path, entry).state


def _read_pickle(path: Path) -> object:
    try:
        with torch.serialization.safe_globals([argparse.Namespace]):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        found = re.search(r"GLOBAL ([\w.]+)", str(err))
        if found is None:  # not a pickle of forbidden objects: bytes that are no pickle at all
            raise CheckpointError(
                f"checkpoint {path} is truncated, corrupt or not a PyTorch checkpoint (it does not unpickle as one); "
                "download or copy it again"
            ) from None
        raise CheckpointError(
            f"checkpoint {path} holds objects other than tensors and plain containers ({found.group(1)}); vitpos "
            "never unpickles such files, as they can run code. If you trust the file, re-save its weights where you "
            "trust it, as a dict of tensors or as safetensors"
        ) from None
    except Exception as err:  # torch raises RuntimeError, EOFError, ... on truncated archives
        raise CheckpointError(
            f"checkpoint {path} is truncated or corrupt ({type(err).__name__}: {plain_text(err)}); "
            "download or copy it again"
        ) from None


def _entry(raw: object, path: Path, entry: str | None) -> str | None:
    """``entry``, else the first of :data:`ENTRIES` ``raw`` holds (None for a state dict)."""
    if entry is not None or not isinstance(raw, dict) or all(isinstance(v, torch.Tensor) for v in raw.values()):
        return entry
    found = [name for name in ENTRIES if isinstance(raw.get(name), dict)]
    if not found:
        raise CheckpointError(
            f"checkpoint {path} is neither a state dict nor a dict with one of the entries "
            f"{', '.join(ENTRIES)}; its entries: {', '.join(map(str, raw))}"
        )
    if found[0] == "state_dict_ema" and "state_dict" in found:
        LOG.info(
            f"checkpoint {path}: its EMA weights (entry 'state_dict_ema'), which T2T-ViT's evaluation uses; "
            f"{setting('entry', 'state_dict')} takes the others"
        )
    return found[0]


def _unwrap(raw: object, path: Path, entry: str | None) -> dict[str, torch.Tensor]:
    if not isinstance(raw, dict):
        raise CheckpointError(f"checkpoint {path} holds a {type(raw).__name__}, not a dict of weights")
    if entry is not None:
        if entry not in raw:
            raise CheckpointError(f"checkpoint {path} has no entry {entry!r}; its entries: {', '.join(map(str, raw))}")
        raw = raw[entry]
    if not isinstance(raw, dict):
        raise CheckpointError(f"checkpoint {path}: entry {entry!r} is a {type(raw).__name__}, not a dict of weights")
    bad = [str(k) for k, v in raw.items() if not isinstance(v, torch.Tensor)]
    if bad:
        raise CheckpointError(
            f"checkpoint {path}: entries {', '.join(bad[:5])} are not tensors; pass entry= to pick the weights"
        )
    if raw and all(str(k).startswith("module.") for k in raw):
        raw = {k[len("module.") :]: v for k, v in raw.items()}
    return dict(raw)
