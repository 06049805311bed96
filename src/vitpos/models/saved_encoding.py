"""Save an absolute position encoding to a file and start any model from it (thesis §5.1).

The file is safetensors: the parameters and buffers of the model's absolute encoding, with
metadata naming the encoding (its slot string), the width and the grid it was trained at.
Loading checks that the receiving model has the same encoding and width; a learned table saved
at another grid is resampled bicubically to the model's native grid, and Fourier and
learnable-sinusoidal weights fit any grid as they are.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, safe_open, save_file
from torch import nn

from ..encodings.absolute import AbsoluteEncoding
from ..errors import CheckpointError, VitposError, quote
from ..files import replacing
from ..grid import resample_table
from .host import Host, is_host

__all__ = ["save_position_encoding", "load_position_encoding", "read_position_metadata"]

FORMAT = "vitpos-position-encoding-1"


def _host(model: nn.Module) -> Host:
    if not is_host(model):
        raise VitposError(f"a {type(model).__name__} is not a vitpos model; give one built by vitpos.create_model")
    return model


def _absolute(model: Host) -> AbsoluteEncoding:
    module = model.stages[0].absolute  # the plain ViT's one stage
    if not isinstance(module, AbsoluteEncoding) or not list(module.state_dict()):
        raise VitposError(
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
    with replacing(path) as tmp:
        save_file(tensors, str(tmp), metadata=metadata)
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
        raise CheckpointError(f"position-encoding file {path} is not a readable safetensors file ({err})") from None
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not a saved vitpos position encoding (format {quote(meta.get('format'))})")
    return {
        "absolute": _entry(meta, "absolute", path, str, lambda v: bool(v.strip())),
        "embed_dim": _entry(meta, "embed_dim", path, int, lambda v: v >= 1),
        "grid": tuple(_entry(meta, "grid", path, json.loads, _is_grid)),
        "notes": _entry(meta, "notes", path, json.loads, lambda v: isinstance(v, dict)),
    }


def _is_grid(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(type(v) is int and 1 <= v <= 2**16 for v in value)


def _entry(
    meta: dict[str, str], key: str, path: Path, parse: Callable[[str], Any], valid: Callable[[Any], bool]
) -> Any:
    """Metadata entry ``key`` of ``path``, parsed and checked; a clear error if missing or malformed."""
    if key not in meta:
        raise CheckpointError(
            f"position-encoding file {path} lacks the {key!r} entry of its metadata; write it again with "
            "`vitpos pretrain-pe` (or save_position_encoding)"
        )
    try:
        value = parse(meta[key])
        ok = valid(value)
    except ValueError:
        ok = False
    if not ok:
        raise CheckpointError(
            f"position-encoding file {path}: its {key!r} metadata {quote(meta[key])} is malformed; write the file "
            "again with `vitpos pretrain-pe` (or save_position_encoding)"
        )
    return value


@torch.no_grad()
def load_position_encoding(model: nn.Module, path: str | Path) -> dict[str, Any]:
    """Copy a saved encoding into ``model``'s absolute encoding; returns the file's metadata."""
    meta = read_position_metadata(path)
    host = _host(model)
    module = _absolute(host)
    wanted = (host.cfg.position.absolute, host.cfg.embed_dims[0])
    if (meta["absolute"], meta["embed_dim"]) != wanted:
        raise CheckpointError(
            f"{path} holds absolute={meta['absolute']!r} of width {meta['embed_dim']}, but the model has "
            f"absolute={wanted[0]!r} of width {wanted[1]}; build the model with the same encoding and width"
        )
    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError) as err:
        raise CheckpointError(f"position-encoding file {path} is truncated or corrupt ({err})") from None
    own = module.state_dict()
    if set(tensors) != set(own):
        raise CheckpointError(f"{path} has tensors {sorted(tensors)}, the model's encoding has {sorted(own)}")
    native = module.native_grid
    table = tensors.get("table")
    if table is not None and table.ndim >= 2 and table.shape[-2] != meta["grid"][0] * meta["grid"][1]:
        raise CheckpointError(
            f"{path}: its table has {table.shape[-2]} rows but its metadata says grid {meta['grid']}; "
            "write the file again with `vitpos pretrain-pe`"
        )
    if getattr(module, "learned_table", False) and meta["grid"] != native:
        # a table saved at another grid: resampled bicubically, as the model itself does at run time
        tensors["table"] = resample_table(tensors["table"], meta["grid"], native)
    for name, value in tensors.items():
        if value.shape != own[name].shape:
            raise CheckpointError(
                f"{path}: {name} has shape {tuple(value.shape)}, the model's has {tuple(own[name].shape)}"
            )
        own[name].copy_(value)
    return meta
