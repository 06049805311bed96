"""Read a checkpoint file into a flat state dict without running code from it.

``.safetensors`` files are read as they are; anything else goes through
``torch.load(weights_only=True)``, which refuses pickles that would build arbitrary objects.
A dict holding the weights under ``model``, ``state_dict`` or ``model_ema`` (DeiT, Swin, PVT,
iRPE releases) is unwrapped, and DistributedDataParallel's ``module.`` prefix is removed. A
vitpos run folder or checkpoint folder yields its ``model.safetensors``.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, safe_open

from ..errors import VitposError

__all__ = ["CheckpointLoadError", "ENTRIES", "read_state_dict", "saved_model_config"]

ENTRIES = ("model", "state_dict", "model_ema")
"""Where released training checkpoints keep their weights, in the order they are looked for."""


class CheckpointLoadError(VitposError):
    """A checkpoint that cannot be read, or whose weights do not fit the model asked for."""


def _weights_file(path: Path) -> Path:
    if path.is_dir():
        from ..engine.checkpoint import MODEL_FILE, find_checkpoint  # the engine loads weights through this module

        return find_checkpoint(path) / MODEL_FILE
    return path


def saved_model_config(path: str | Path) -> dict | None:
    """The model config stored with a vitpos checkpoint (folder or ``.safetensors``), else None."""
    from ..engine.checkpoint import FORMATS

    path = _weights_file(Path(path))
    if path.suffix != ".safetensors" or not path.is_file():
        return None
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
    except (SafetensorError, OSError, ValueError):
        return None  # read_state_dict reports the damage
    return json.loads(meta["model_config"]) if meta.get("format") in FORMATS and "model_config" in meta else None


def read_state_dict(path: str | Path, entry: str | None = None) -> dict[str, torch.Tensor]:
    """The weights in ``path`` as {name: tensor}; ``entry`` picks one of :data:`ENTRIES` explicitly."""
    path = _weights_file(Path(path))
    if not path.is_file():
        raise CheckpointLoadError(f"checkpoint {path} does not exist; check the path")
    raw = _read_safetensors(path) if path.suffix == ".safetensors" else _read_pickle(path)
    return _unwrap(raw, path, entry)


def _read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError) as err:
        raise CheckpointLoadError(
            f"checkpoint {path} is truncated or corrupt ({err}); download or copy it again"
        ) from None


def _read_pickle(path: Path) -> object:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointLoadError(
            f"checkpoint {path} holds objects other than tensors and plain containers ({first}); vitpos never "
            "unpickles such files, as they can run code. If you trust the file, re-save its weights where you "
            "trust it: torch.save(torch.load(PATH, weights_only=False)['model'], 'weights.pth') or save them "
            "as safetensors"
        ) from None
    except Exception as err:  # torch raises RuntimeError, EOFError, ... on truncated archives
        raise CheckpointLoadError(
            f"checkpoint {path} is truncated or corrupt ({type(err).__name__}: {err}); download or copy it again"
        ) from None


def _unwrap(raw: object, path: Path, entry: str | None) -> dict[str, torch.Tensor]:
    if not isinstance(raw, dict):
        raise CheckpointLoadError(f"checkpoint {path} holds a {type(raw).__name__}, not a dict of weights")
    if entry is not None:
        if entry not in raw:
            raise CheckpointLoadError(
                f"checkpoint {path} has no entry {entry!r}; its entries: {', '.join(map(str, raw))}"
            )
        raw = raw[entry]
    elif not all(isinstance(v, torch.Tensor) for v in raw.values()):
        found = [name for name in ENTRIES if isinstance(raw.get(name), dict)]
        if not found:
            raise CheckpointLoadError(
                f"checkpoint {path} is neither a state dict nor a dict with one of the entries "
                f"{', '.join(ENTRIES)}; its entries: {', '.join(map(str, raw))}"
            )
        raw = raw[found[0]]
    if not isinstance(raw, dict):
        raise CheckpointLoadError(
            f"checkpoint {path}: entry {entry!r} is a {type(raw).__name__}, not a dict of weights"
        )
    bad = [str(k) for k, v in raw.items() if not isinstance(v, torch.Tensor)]
    if bad:
        raise CheckpointLoadError(
            f"checkpoint {path}: entries {', '.join(bad[:5])} are not tensors; pass entry= to pick the weights"
        )
    if raw and all(str(k).startswith("module.") for k in raw):
        raw = {k[len("module.") :]: v for k, v in raw.items()}
    return dict(raw)
