"""Build a model with weights: ``vitpos.create_model(name, checkpoint=..., pretrained=...)`` and :func:`load_model`.

:func:`create_model` is :func:`vitpos.models.create_model` (a preset or config, with overrides)
plus the weights: a checkpoint file or folder in any layout of :data:`~.load.LAYOUTS`, or the
authors' released file of the preset (``pretrained=True``, :mod:`.pretrained`). The models
package builds architectures only; weights live one floor up, so nothing below imports them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..config import HostConfig
from ..errors import CheckpointError, setting
from ..memory import AllocationTooLarge
from ..models import factory
from .files import WeightsFile, read_weights
from .layout import Layout
from .load import check_arch, convert_for, layout_of, released_config
from .pretrained import fetch_pretrained
from .resize import Resize
from .run_folder import SavedModel, read_saved_model, saved_config

__all__ = ["create_model", "guess_model", "guess_preset", "load_model", "stored_classes"]

CLASSIFIER_KEYS = ("head.weight", "head.fc.weight", "classifier.fc.weight")
"""Where released files keep their classifier's weight: most; timm's newer Swin; Compact Transformers."""


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
    also returns what is stored with it (configs, data set)."""
    saved = read_saved_model(path)
    weights = saved.ema if ema else saved.weights
    if weights is None:
        raise CheckpointError(f"checkpoint {saved.path} has no EMA weights (trained with ema_decay=0)")
    model = _from_file(saved.model_config, WeightsFile(saved.path, weights, saved.metadata))
    return model.to(device).eval(), saved


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
            name, fields = guess_model(file, layout)
            overrides = {**stored_classes(file), **fields, **overrides}  # what the preset was found with
    backbone = _backbone_from_file(name, file, layout, drop, resize, overrides)
    if backbone is not None:
        return backbone
    cfg = _released_model_config(name, file, layout, keep_grid, overrides)
    try:
        model = factory.create_model(cfg)
    except AllocationTooLarge as err:
        raise CheckpointError(
            f"checkpoint {file.path}: the model its config describes cannot be built here: {err}"
        ) from None
    merged, _ = convert_for(
        model, file.state, layout, file.path, drop=drop, resize=resize, resize_head="num_classes" in overrides
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
    merged, _ = convert_for(target, file.state, layout, file.path, drop=("head", *drop), resize=resize)
    with torch.no_grad():
        target.load_state_dict(merged, strict=True)
    return model


def _released_model_config(
    name: str | HostConfig, file: WeightsFile, layout: Layout, keep_grid: bool, overrides: dict[str, Any]
) -> HostConfig:
    """The config of ``name`` with ``overrides``, the released options and (``keep_grid``) the
    stored sizes, which win over ``img_size`` or ``window_size`` given in ``overrides``. A join given
    in ``overrides`` is kept or refused, never replaced (:func:`~.load.released_config`)."""
    cfg = factory.get_config(name, **overrides)
    check_arch(cfg.arch, layout, file.path)
    cfg = released_config(cfg, layout, file, keep_join="join" in overrides)
    stored = layout.stored_geometry(file.state, cfg) if keep_grid else {}
    return cfg.replace(**stored) if stored else cfg


def stored_classes(file: WeightsFile) -> dict[str, int]:
    """``{"num_classes": N}`` for a released file's classifier of N classes (empty without one)."""
    head = next((file.state[key] for key in CLASSIFIER_KEYS if key in file.state), None)
    return {} if head is None else {"num_classes": head.shape[0]}


def _fitting(file: WeightsFile, layout: Layout, fields: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The presets which, with ``fields``, the checkpoint fills exactly (built on the meta device), each with the
    fields it changes. Presets that become the same model count as one: the one that changes fewest fields, then
    the one the file's stored geometry leaves as it is (a Swin V2 file's window names its preset)."""
    found: list[tuple[HostConfig, str, dict[str, Any]]] = []
    for name in factory.list_models():
        preset = factory.get_config(name)
        if layout.archs and preset.arch not in layout.archs:
            continue
        with contextlib.suppress(ValueError, TypeError):
            cfg = _released_model_config(name, file, layout, True, {**stored_classes(file), **fields})
            with torch.device("meta"):
                model = factory.create_model(cfg)
            convert_for(model, file.state, layout, file.path)
            changed = {k: v for k, v in fields.items() if getattr(preset, k) != v}
            same = next((i for i, (other, _, _) in enumerate(found) if other == cfg), None)
            if same is None:
                found.append((cfg, name, changed))
            elif (len(changed), _moved(preset, file, layout)) < (
                len(found[same][2]),
                _moved(factory.get_config(found[same][1]), file, layout),
            ):
                found[same] = (cfg, name, changed)
    return [(name, changed) for _, name, changed in found]


def _moved(preset: HostConfig, file: WeightsFile, layout: Layout) -> bool:
    """Whether the file's stored geometry changes ``preset`` (a Swin V2 file's window: the preset of another window)."""
    return any(getattr(preset, k) != v for k, v in layout.stored_geometry(file.state, preset).items())


def guess_model(file: WeightsFile, layout: Layout) -> tuple[str, dict[str, Any]]:
    """The preset the checkpoint fits, and the fields it needs: none where a preset fits as it is, else those read
    from the file's keys and shapes (a released variant: :meth:`~.layout.Layout.stored_shapes`) and its grid."""
    found = _fitting(file, layout, {})
    shaped = layout.stored_shapes(file.state) if not found else {}
    if shaped:
        found = _fitting(file, layout, shaped)
    if len(found) == 1:
        name, fields = found[0]
        if fields:
            grid = layout.stored_geometry(file.state, factory.get_config(name, **fields))
            preset = factory.get_config(name)
            fields = {**fields, **{k: v for k, v in grid.items() if getattr(preset, k) != v}}
        return name, fields
    where = f"checkpoint {file.path} ({layout.name} layout)"
    if found:
        names = ", ".join(name for name, _ in found)
        raise CheckpointError(
            f"{where}: several presets fit it ({names}); name the model (--model NAME, see `vitpos models`)"
        )
    if not shaped:
        raise CheckpointError(f"{where}: no preset fits it; name the model (--model NAME, see `vitpos models`)")
    options = ", ".join(setting(k, str(v)) for k, v in shaped.items())
    raise CheckpointError(
        f"{where}: no preset fits it, nor one with the options its shapes suggest ({options}); its shapes: "
        f"{layout.shape_summary(file.state)}. Name the model and the options that build it (--model NAME and "
        f"{', '.join(shaped)})"
    )


def guess_preset(file: WeightsFile, layout: Layout) -> str:
    """The preset the checkpoint fits (:func:`guess_model` also gives the fields read from its shapes)."""
    return guess_model(file, layout)[0]
