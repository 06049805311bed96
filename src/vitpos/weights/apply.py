"""Load a checkpoint into a model built already, strictly and all at once: :func:`load_weights`.

It reads the file (:mod:`.files`), checks that the model has the released options the file needs,
converts the weights (:func:`.load.convert_for`, which refuses with the presets the file fits,
:func:`.guess.preset_advice`) and only then copies them, so a failed load changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import torch
from torch import nn

from ..config import HostConfig
from ..errors import CheckpointError
from .files import WeightsFile, read_weights
from .guess import preset_advice
from .lape import released_join
from .load import LoadResult, Source, check_arch, convert_for, layout_of, model_arch, released_config
from .resize import Resize

__all__ = ["load_weights"]


def _missing_options(cfg: HostConfig, wanted: HostConfig) -> str:
    """The fields and slots where ``cfg`` differs from ``wanted``, as ``name=value`` (``wanted``'s values)."""
    ours = {**cfg.to_dict(), **cfg.position.to_dict()}
    theirs = {**wanted.to_dict(), **wanted.position.to_dict()}
    return ", ".join(f"{k}={v!r}" for k, v in theirs.items() if k != "position" and ours[k] != v)


def _weights(checkpoint: Source, entry: str | None) -> WeightsFile:
    if isinstance(checkpoint, WeightsFile):
        return checkpoint
    if isinstance(checkpoint, Mapping):
        return WeightsFile(Path("<state dict>"), dict(checkpoint))
    return read_weights(checkpoint, entry)


def load_weights(
    model: nn.Module,
    checkpoint: Source,
    *,
    drop: Iterable[str] = (),
    resample: bool = True,
    resize: Resize | None = None,
    entry: str | None = None,
    resize_head: bool = False,
) -> LoadResult:
    """Load ``checkpoint`` (a file or folder in any layout of :data:`LAYOUTS`, or its weights) into ``model``, strictly.

    ``drop``: parameter names, prefixes (``"head"``) or shell patterns (``"*.relative.*"``) kept
    at their initialisation, checkpoint keys they match ignored (``"pos_embed"``); ``resize_head``: drop the
    classifier when its class count differs.
    ``resample``: fit position tables to the model's grid and Swin tables to its window; when
    False a size mismatch is an error. ``resize``: how (:mod:`vitpos.weights.resize`): ``"timm"``
    (antialiased bicubic, geometric Swin tables; the default for timm, DeiT, iRPE, LaPE and Swin
    files) or ``"model"`` (the model's run-time resampling; the default for vitpos and PVT files).
    ``entry``: the dict entry holding the weights (default: the first of ``model``,
    ``state_dict_ema``, ``state_dict`` and ``model_ema`` there; ``ema`` for a vitpos run's EMA weights).
    The model must already use the released options the file needs (an iRPE Euclidean model
    ``round``, a LaPE model ``lape:chained``, or ``lape`` for a first-release training checkpoint,
    a T2T-ViT model ``sincos1d:prefix``); ``vitpos.create_model(NAME, checkpoint=PATH)`` selects them.
    """
    file = _weights(checkpoint, entry)
    layout = layout_of(file)
    check_arch(model_arch(model), layout, file.path)
    cfg = getattr(model, "cfg", None)
    if isinstance(cfg, HostConfig) and (wanted := released_config(cfg, layout, file)) != cfg:
        note = layout.options_note() if released_join(file.args) is None else ""
        raise CheckpointError(
            f"checkpoint {file.path} ({layout.name} layout) needs the released code's options, which this model lacks: "
            f"{_missing_options(cfg, wanted)}; build it with them, or use vitpos.create_model(NAME, checkpoint=PATH), "
            "which selects them" + (f". {note}" if note else "")
        )
    merged, result = convert_for(
        model,
        file.state,
        layout,
        file.path,
        drop=drop,
        resample=resample,
        resize=resize,
        resize_head=resize_head,
        advise=preset_advice,
    )
    with torch.no_grad():
        model.load_state_dict(merged, strict=True)
    return result
