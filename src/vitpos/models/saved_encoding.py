"""Save an absolute position encoding to a file and start any model from it (thesis §5.1).

The file is safetensors: the parameters and buffers of the model's absolute encoding, with
metadata naming the encoding (its slot string), the width and the grid it was trained at.
Loading checks that the receiving model has the same encoding and width; a learned table saved
at another grid is resampled bicubically to the model's native grid, and Fourier and
learnable-sinusoidal weights fit any grid as they are.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, safe_open, save_file
from torch import nn

from ..encodings.absolute import AbsoluteEncoding
from ..grid import resample_table
from .host import Host, is_host

__all__ = ["save_position_encoding", "load_position_encoding", "read_position_metadata"]

FORMAT = "vitpos-position-encoding-1"


def _host(model: nn.Module) -> Host:
    if not is_host(model):
        raise TypeError(f"a {type(model).__name__} is not a vitpos model; give one built by vitpos.create_model")
    return model


def _absolute(model: Host) -> AbsoluteEncoding:
    module = model.stages[0].absolute  # the plain ViT's one stage
    if not isinstance(module, AbsoluteEncoding) or not list(module.state_dict()):
        raise ValueError(
            f"the model's absolute encoding ({model.cfg.position.absolute!r}) has no parameters to save or load; "
            "use a learnable one: learned, learnable_sincos or fourier"
        )
    return module


def save_position_encoding(model: nn.Module, path: str | Path, **notes: Any) -> Path:
    """Write the absolute encoding of ``model`` to ``path`` (safetensors); ``notes`` go into the metadata."""
    host = _host(model)
    module = _absolute(host)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().contiguous().cpu() for k, v in module.state_dict().items()}
    metadata = {
        "format": FORMAT,
        "absolute": host.cfg.position.absolute,
        "embed_dim": str(host.cfg.embed_dims[0]),
        "grid": json.dumps(list(host.cfg.stage_grid(0))),
        "notes": json.dumps(notes),
    }
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    save_file(tensors, str(tmp), metadata=metadata)
    os.replace(tmp, path)  # readers see the old file or the new one, never a part
    return path


def read_position_metadata(path: str | Path) -> dict[str, Any]:
    """The metadata of a saved encoding: absolute, embed_dim, grid, notes."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"position-encoding file {path} does not exist; create it with `vitpos pretrain-pe`")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
    except (SafetensorError, OSError) as err:
        raise ValueError(f"{path} is not a readable safetensors file ({err})") from None
    if meta.get("format") != FORMAT:
        raise ValueError(f"{path} is not a saved vitpos position encoding (format {meta.get('format')!r})")
    return {
        "absolute": meta["absolute"],
        "embed_dim": int(meta["embed_dim"]),
        "grid": tuple(json.loads(meta["grid"])),
        "notes": json.loads(meta["notes"]),
    }


@torch.no_grad()
def load_position_encoding(model: nn.Module, path: str | Path) -> dict[str, Any]:
    """Copy a saved encoding into ``model``'s absolute encoding; returns the file's metadata."""
    meta = read_position_metadata(path)
    host = _host(model)
    module = _absolute(host)
    wanted = (host.cfg.position.absolute, host.cfg.embed_dims[0])
    if (meta["absolute"], meta["embed_dim"]) != wanted:
        raise ValueError(
            f"{path} holds absolute={meta['absolute']!r} of width {meta['embed_dim']}, but the model has "
            f"absolute={wanted[0]!r} of width {wanted[1]}; build the model with the same encoding and width"
        )
    tensors = load_file(str(path))
    own = module.state_dict()
    if set(tensors) != set(own):
        raise ValueError(f"{path} has tensors {sorted(tensors)}, the model's encoding has {sorted(own)}")
    native = module.native_grid
    if getattr(module, "learned_table", False) and meta["grid"] != native:
        # a table saved at another grid: resampled bicubically, as the model itself does at run time
        tensors["table"] = resample_table(tensors["table"], meta["grid"], native)
    for name, value in tensors.items():
        if value.shape != own[name].shape:
            raise ValueError(f"{path}: {name} has shape {tuple(value.shape)}, the model's has {tuple(own[name].shape)}")
        own[name].copy_(value)
    return meta
