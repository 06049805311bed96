"""Load a checkpoint of any known layout into a vitpos model, strictly and all at once.

The state dict is read without running code (:mod:`.files`), its layout detected, converted
(:mod:`.layout` and one module per layout), and compared with the model: any key left
unmapped, any parameter missing and any shape that differs is an error that lists them and
says what to do. Only then are the weights copied, so a failed load changes nothing.
"""

from __future__ import annotations

import contextlib
import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..config import HostConfig
from ..models.factory import config_from_dict, get_config, list_models
from ..registry import ARCHITECTURES
from .files import CheckpointLoadError, read_state_dict, saved_model_config
from .irpe import IRPEZoo
from .lape import LapeViT
from .layout import Layout, Target
from .native import Native
from .pvt import PVTv1
from .swin import MicrosoftSwin, TimmSwin
from .vit import TimmViT

__all__ = ["LAYOUTS", "LoadResult", "detect_layout", "load_checkpoint", "create_from_checkpoint", "guess_preset"]

LAYOUTS: tuple[Layout, ...] = (Native(), IRPEZoo(), LapeViT(), TimmViT(), MicrosoftSwin(), TimmSwin(), PVTv1())
"""Every layout, most specific first: the first that matches a state dict is used."""

SHOWN = 8
"""Keys listed per kind of problem in an error message."""


@dataclass
class LoadResult:
    """What a load did."""

    layout: str
    dropped: list[str] = field(default_factory=list)
    """Model parameters kept at their initialisation (``drop``, or a re-sized classifier)."""


def detect_layout(state: dict[str, torch.Tensor], source: Path | str) -> Layout:
    """The layout of ``state``; raises naming the known layouts if none matches."""
    keys = set(state)
    for layout in LAYOUTS:
        if layout.matches(keys):
            return layout
    shown = ", ".join(sorted(keys)[:SHOWN]) + (" ..." if len(keys) > SHOWN else "")
    known = "; ".join(f"{layout.name} ({layout.description})" for layout in LAYOUTS)
    raise CheckpointLoadError(
        f"checkpoint {source} is in no layout vitpos reads (its keys: {shown}). Known layouts: {known}"
    )


def _listed(keys: Iterable[str]) -> str:
    keys = list(keys)
    return ", ".join(keys[:SHOWN]) + (f" and {len(keys) - SHOWN} more" if len(keys) > SHOWN else "")


def _matches(patterns: Iterable[str], key: str) -> bool:
    """``key`` is one of ``patterns``, lies under one (a prefix ending at a dot) or matches a shell pattern."""
    return any(key == p or key.startswith(p.rstrip(".") + ".") or fnmatch.fnmatchcase(key, p) for p in patterns)


def convert_for(
    model: nn.Module,
    state: dict[str, torch.Tensor],
    layout: Layout,
    source: Path | str,
    *,
    drop: Iterable[str] = (),
    resample: bool = True,
    resize_head: bool = False,
) -> tuple[dict[str, torch.Tensor], LoadResult]:
    """The model's full state dict with the checkpoint's weights in place; raises listing every problem."""
    check_arch(model_arch(model), layout, source)
    left = dict(state)
    weights = layout.convert(left, Target(model, source, resample))
    own = model.state_dict()
    drop = list(drop)
    if (
        resize_head
        and "head.weight" in weights
        and "head.weight" in own
        and weights["head.weight"].shape != own["head.weight"].shape
    ):
        drop.append("head")
    dropped = sorted(k for k in own if _matches(drop, k))
    weights = {k: v for k, v in weights.items() if not _matches(drop, k)}
    left = {k: v for k, v in left.items() if not _matches(drop, k)}
    problems = []
    unmapped = sorted(set(left) | (set(weights) - set(own)))
    if unmapped:
        problems.append(f"keys with no place in the model: {_listed(unmapped)}")
    missing = [k for k in own if k not in weights and k not in dropped]
    if missing:
        problems.append(f"model parameters the checkpoint does not provide: {_listed(missing)}")
    shapes = [
        f"{k} (checkpoint {tuple(weights[k].shape)}, model {tuple(v.shape)})"
        for k, v in own.items()
        if k in weights and weights[k].shape != v.shape
    ]
    if shapes:
        problems.append(f"shapes that differ: {_listed(shapes)}")
    if problems:
        advice = layout.hint(unmapped) or _advice(shapes)
        raise CheckpointLoadError(
            f"checkpoint {source} ({layout.name} layout) does not fit this {model_arch(model)!r} model: "
            + "; ".join(problems)
            + f". {advice}"
        )
    merged = {k: weights.get(k, v) for k, v in own.items()}
    return merged, LoadResult(layout.name, dropped)


def check_arch(arch: str, layout: Layout, source: Path | str) -> None:
    """Raise unless models of host ``arch`` can take checkpoints in ``layout``."""
    if arch not in layout.archs:
        raise CheckpointLoadError(
            f"checkpoint {source} is a {layout.description} checkpoint; it cannot load into a "
            f"{arch!r} model. Create a model of the same family ({', '.join(layout.archs)})"
        )


def _advice(shapes: list[str]) -> str:
    if any(s.startswith("head.") for s in shapes):
        return "The classifier differs: pass num_classes=N to create_model (or drop=('head',)) to re-initialise it"
    return (
        "Create the preset that matches the checkpoint (`vitpos convert SRC DST` without --model finds it), "
        "or name the parameters to keep at their initialisation with drop=(...)"
    )


def model_arch(model: nn.Module) -> str:
    """The host name of a vitpos model."""
    return getattr(getattr(model, "cfg", None), "arch", type(model).__name__)


def load_checkpoint(
    model: nn.Module,
    path: str | Path,
    *,
    drop: Iterable[str] = (),
    resample: bool = True,
    entry: str | None = None,
    resize_head: bool = False,
) -> LoadResult:
    """Load the checkpoint at ``path`` (any layout in :data:`LAYOUTS`) into ``model``, strictly.

    ``drop``: parameter names, prefixes (``"head"``) or shell patterns (``"*.relative.*"``) kept
    at their initialisation, checkpoint keys they match ignored (``"pos_embed"``); ``resize_head``: drop the
    classifier when its class count differs.
    ``resample``: fit position tables to the model's grid and Swin tables to its window
    (bicubic); when False a size mismatch is an error. ``entry``: the dict entry holding the
    weights (default: ``model``, ``state_dict`` or ``model_ema``, whichever is there).
    The model must already use the released options the layout needs (an iRPE Euclidean
    model ``round``, a LaPE model ``lape:chained``); :func:`create_from_checkpoint` selects them.
    """
    state = read_state_dict(path, entry)
    layout = detect_layout(state, path)
    check_arch(model_arch(model), layout, path)
    cfg = getattr(model, "cfg", None)
    if cfg is not None and layout.released_config(cfg) != cfg:
        wanted = layout.released_config(cfg).position
        raise CheckpointLoadError(
            f"checkpoint {path} ({layout.name} layout) needs the released code's options, which this model lacks: "
            f"relative={wanted.relative!r}, join={wanted.join!r}; build it with them, or use "
            "vitpos.create_model(NAME, checkpoint=PATH), which selects them"
        )
    merged, result = convert_for(model, state, layout, path, drop=drop, resample=resample, resize_head=resize_head)
    with torch.no_grad():
        model.load_state_dict(merged, strict=True)
    return result


def released_model_config(
    name: str | HostConfig,
    state: dict[str, torch.Tensor],
    layout: Layout,
    source: Path | str,
    keep_grid: bool,
    overrides: dict[str, Any],
) -> HostConfig:
    """The config of ``name`` with ``overrides``, the released options and (``keep_grid``) the
    stored sizes, which win over ``img_size`` or ``window_size`` given in ``overrides``."""
    cfg = get_config(name, **overrides)
    check_arch(cfg.arch, layout, source)
    cfg = layout.released_config(cfg)
    stored = layout.stored_geometry(state, cfg) if keep_grid else {}
    return cfg.replace(**stored) if stored else cfg


def create_from_checkpoint(
    name: str | HostConfig | None,
    path: str | Path,
    *,
    keep_grid: bool = False,
    entry: str | None = None,
    drop: Iterable[str] = (),
    **overrides: Any,
) -> nn.Module:
    """Build preset ``name`` and load ``path``; with ``name`` None, a vitpos checkpoint's own config
    or else the preset whose parameters match the checkpoint.

    The released options of the checkpoint's layout are selected. ``keep_grid``: build the
    model at the grid (and Swin window) the checkpoint was stored for, so that other input
    sizes are resampled at run time rather than on load. ``num_classes`` other than the
    checkpoint's re-initialises the classifier (as timm does).
    """
    state = read_state_dict(path, entry)
    layout = detect_layout(state, path)
    if name is None:
        saved = saved_model_config(path)
        name = config_from_dict(saved) if saved is not None else guess_preset(state, layout, path)
    cfg = released_model_config(name, state, layout, path, keep_grid, overrides)
    model = ARCHITECTURES.get(cfg.arch)(cfg)
    merged, _ = convert_for(model, state, layout, path, drop=drop, resize_head="num_classes" in overrides)
    with torch.no_grad():
        model.load_state_dict(merged, strict=True)
    return model


def guess_preset(state: dict[str, torch.Tensor], layout: Layout, source: Path | str) -> str:
    """The preset whose parameters (built on the meta device) the checkpoint fills exactly; presets
    that become the same model once the released options are selected count as one (the first)."""
    head = state.get("head.weight", state.get("head.fc.weight"))
    found: list[str] = []
    configs: list[HostConfig] = []
    for name in list_models():
        cfg = get_config(name)
        if cfg.arch not in layout.archs:
            continue
        overrides = {} if head is None else {"num_classes": head.shape[0]}
        with contextlib.suppress(ValueError, TypeError):
            cfg = released_model_config(name, state, layout, source, True, overrides)
            with torch.device("meta"):
                model = ARCHITECTURES.get(cfg.arch)(cfg)
            convert_for(model, state, layout, source)
            if cfg not in configs:
                found.append(name)
                configs.append(cfg)
    if len(found) != 1:
        what = f"several presets fit it ({', '.join(found)})" if found else "no preset fits it"
        raise CheckpointLoadError(
            f"checkpoint {source} ({layout.name} layout): {what}; name the model (--model NAME, see `vitpos models`)"
        )
    return found[0]
