"""Build a model with weights: ``vitpos.create_model(name, checkpoint=..., pretrained=...)`` and :func:`load_model`.

:func:`create_model` is :func:`vitpos.models.create_model` (a preset or config, with overrides)
plus the weights: a checkpoint file or folder in any layout of :data:`~.load.LAYOUTS`, or the
authors' released file of the preset (``pretrained=True``, :mod:`.pretrained`). The models
package builds architectures only; weights live one floor up, so nothing below imports them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..config import HostConfig
from ..errors import CheckpointError
from ..memory import AllocationTooLarge
from ..models import factory
from .data_config import DataConfig
from .export import released_data_config
from .files import WeightsFile, read_weights
from .guess import guess_model, guess_preset, preset_advice, released_model_config, stored_classes
from .layout import Layout
from .load import check_arch, convert_for, layout_of, released_config
from .pretrained import fetch_pretrained, names_release, resolve_checkpoint
from .resize import Resize
from .run_folder import EMA_FILE, MODEL_FILE, SavedModel, read_saved_model, saved_config

__all__ = [
    "create_model",
    "guess_model",
    "guess_preset",
    "is_released",
    "load_model",
    "saved_data_config",
    "stored_classes",
]


def create_model(
    name: str | HostConfig | None,
    *,
    checkpoint: str | Path | None = None,
    pretrained: bool = False,
    keep_grid: bool = False,
    entry: str | None = None,
    drop: Iterable[str] = (),
    resize: Resize | None = None,
    **overrides: Any,
) -> nn.Module:
    """Build a model from a preset name or a config, optionally with weights.

    ``overrides`` are model fields (``num_classes=10``, ``head="gap"``) or slot values by their
    short string (``absolute="sincos2d"``, ``relative="irpe:product:ctx:k"``).
    ``checkpoint``: a released (timm/DeiT, iRPE, LaPE, Swin, PVT v1, Compact Transformers, T2T-ViT,
    CeiT) or vitpos checkpoint, loaded strictly with the released code's options selected (a
    ``join`` given here is kept where the file cannot tell, refused where it names another);
    ``name`` may then be None to use a vitpos checkpoint's own config or pick the preset whose
    parameters match the file.
    ``pretrained``: the authors' released file of preset ``name``, downloaded once into the
    cache (``VITPOS_CACHE``) and verified. ``keep_grid`` builds the model at the checkpoint's
    grid instead of resampling its tables on load (``resize``: how, see :func:`vitpos.load_weights`).
    ``num_classes`` other than the checkpoint's re-initialises the classifier (as timm does).
    A model with a host backbone (``detr_pvt_tiny``) takes a classifier's checkpoint into that host.
    """
    if pretrained:
        if checkpoint is not None:
            raise ValueError("give checkpoint=PATH or pretrained=True, not both")
        if not isinstance(name, str):
            raise ValueError("pretrained=True needs a preset name (see `vitpos models --pretrained`)")
        checkpoint = fetch_pretrained(name)
    if checkpoint is None:
        if name is None:
            raise ValueError("create_model needs a preset name or a config (or a checkpoint to pick one from)")
        unused = [k for k, v in dict(keep_grid=keep_grid, entry=entry, drop=tuple(drop), resize=resize).items() if v]
        if unused:
            raise ValueError(f"{', '.join(unused)} apply to loading weights; give checkpoint=PATH or pretrained=True")
        return factory.create_model(name, **overrides)
    file = read_weights(checkpoint, entry)
    return _from_file(name, file, keep_grid=keep_grid, drop=drop, resize=resize, overrides=overrides)


def load_model(
    path: str | Path, *, ema: bool = False, device: torch.device | str = "cpu"
) -> tuple[nn.Module, SavedModel]:
    """Rebuild the model a vitpos checkpoint was written for, with its (EMA) weights, in eval mode;
    also returns what is stored with it (configs, data set). Released weights (a file, a URL or a
    preset's name) give the preset they fit, with no training or data config, the released models'
    preprocessing, and their file as ``path``."""
    source = resolve_checkpoint(path)
    if is_released(source):
        if ema:
            raise CheckpointError(f"{path} is a released file, not a vitpos run; EMA weights are a run's")
        model, saved = _released(source, str(path) if names_release(path) else None)
        return model.to(device).eval(), saved
    saved = read_saved_model(source)
    weights = saved.ema if ema else saved.weights
    if weights is None:
        raise CheckpointError(f"checkpoint {saved.path} has no EMA weights (trained with ema_decay=0)")
    model = _from_file(saved.model_config, WeightsFile(saved.path, weights, saved.metadata))
    return model.to(device).eval(), saved


def is_released(source: Path) -> bool:
    """Whether a resolved checkpoint is a released file, not a vitpos run, checkpoint or ``model.safetensors``."""
    return source.is_file() and source.name not in (MODEL_FILE, EMA_FILE)


def saved_data_config(path: str | Path) -> DataConfig | None:
    """How images are prepared for a vitpos checkpoint; None for released weights (their models' own applies)."""
    source = resolve_checkpoint(path)
    return None if is_released(source) else read_saved_model(source).data_config


def _released(source: Path, preset: str | None) -> tuple[nn.Module, SavedModel]:
    """A released file's model (``preset``, or the preset it fits) and what :func:`load_model` returns with it."""
    model = _from_file(preset, read_weights(source))
    cfg = model.cfg
    assert isinstance(cfg, HostConfig), "a released file is read into a host: a classifier"
    prepared = json.dumps(released_data_config(cfg).to_dict())
    return model, SavedModel(source, cfg, {}, {}, model.state_dict(), None, {"data_config": prepared})


def _from_file(
    name: str | HostConfig | None,
    file: WeightsFile,
    *,
    keep_grid: bool = False,
    drop: Iterable[str] = (),
    resize: Resize | None = None,
    overrides: dict[str, Any] | None = None,
) -> nn.Module:
    """The model ``name`` (None: the file's own config, or the preset it fits) with the weights of ``file``."""
    overrides = overrides or {}
    layout = layout_of(file)
    if name is None:
        saved = saved_config(file.metadata, file.path)
        if saved is not None:
            name = saved
        else:
            name, fields = guess_model(file, layout, given=overrides)
            overrides = {**stored_classes(file), **fields, **overrides}  # what the preset was found with
    backbone = _backbone_from_file(name, file, layout, drop, resize, overrides)
    if backbone is not None:
        return backbone
    cfg = released_model_config(name, file, layout, keep_grid, overrides)
    try:
        model = factory.create_model(cfg)
    except AllocationTooLarge as err:
        raise CheckpointError(
            f"checkpoint {file.path}: the model its config describes cannot be built here: {err}"
        ) from None
    merged, _ = convert_for(
        model,
        file.state,
        layout,
        file.path,
        drop=drop,
        resize=resize,
        resize_head="num_classes" in overrides,
        advise=preset_advice,
    )
    with torch.no_grad():
        model.load_state_dict(merged, strict=True)
    return model


def _backbone_from_file(
    name: str | HostConfig,
    file: WeightsFile,
    layout: Layout,
    drop: Iterable[str],
    resize: Resize | None,
    overrides: dict[str, Any],
) -> nn.Module | None:
    """A model whose ``backbone`` is a host (a DETR on PVT) with a classifier's released weights in that host
    (its classifier left out, the released options selected); None where the file is the model's own."""
    cfg = factory.get_config(name, **overrides)
    host = getattr(cfg, "backbone", None)
    if not isinstance(host, HostConfig) or not layout.archs or cfg.arch in layout.archs:
        return None
    check_arch(host.arch, layout, file.path)
    model = factory.create_model(cfg.replace(backbone=released_config(host, layout, file)))
    target = getattr(model, "pretrained_host")  # noqa: B009  (a property of the model class, not a submodule)
    assert isinstance(target, nn.Module)
    merged, _ = convert_for(
        target, file.state, layout, file.path, drop=("head", *drop), resize=resize, advise=preset_advice
    )
    with torch.no_grad():
        target.load_state_dict(merged, strict=True)
    return model
