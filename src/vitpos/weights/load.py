"""Weights of any known layout converted for a vitpos model, strictly and all at once: :func:`convert_for`
(:func:`.apply.load_weights` copies them in).

The state dict is read without running code (:mod:`.files`), its layout detected, converted
(:mod:`.layout` and one module per layout), and compared with the model: any key left
unmapped, any parameter missing and any shape that differs is an error that lists them and
says what to do. Only then are the weights copied, so a failed load changes nothing.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from ..config import HostConfig
from ..errors import CheckpointError, on_command_line, setting
from .ceit import CeiTLayout
from .compact import CompactTransformers
from .files import WeightsFile
from .irpe import IRPEZoo
from .lape import LapeViT, released_join
from .layout import Layout, Target
from .native import Native
from .pvt import PVTv1
from .resize import RESIZES, Resize
from .rope_vit import DeiT3Layout, RopeSwin
from .run_folder import FORMATS
from .swin import MicrosoftSwin, TimmSwin
from .swin_v2 import MicrosoftSwinV2, TimmSwinV2
from .t2t import T2TViTLayout
from .vit import TimmViT

LOG = logging.getLogger("vitpos.weights")
"""One line when a checkpoint's classifier is replaced by a fresh one of the model's size."""

__all__ = [
    "LAYOUTS",
    "LoadResult",
    "Source",
    "convert_for",
    "detect_layout",
    "layout_of",
    "model_arch",
    "released_config",
]

Source = str | Path | Mapping[str, torch.Tensor] | WeightsFile
"""A checkpoint file or folder, a state dict already in memory, or a file already read."""
Advisor = Callable[[dict[str, torch.Tensor], Layout, Path | str], str]
"""What to build instead for a file that does not fit its model (its state, layout and source), or ""."""

NATIVE = Native()
LAYOUTS: tuple[Layout, ...] = (
    NATIVE,
    IRPEZoo(),
    LapeViT(),
    DeiT3Layout(),
    TimmViT(),
    MicrosoftSwinV2(),
    TimmSwinV2(),
    RopeSwin(),
    MicrosoftSwin(),
    TimmSwin(),
    PVTv1(),
    CompactTransformers(),
    T2TViTLayout(),
    CeiTLayout(),
)
"""Every layout, most specific first: the first that matches a state dict is used."""

SHOWN = 8
"""Keys listed per kind of problem in an error message."""


@dataclass
class LoadResult:
    """What a load did."""

    layout: str
    dropped: list[str] = field(default_factory=list)
    """Model parameters kept at their initialisation (``drop``, or a re-sized classifier)."""


def layout_of(file: WeightsFile) -> Layout:
    """The layout of ``file``: vitpos's own for a file in the vitpos format, else :func:`detect_layout`'s."""
    return NATIVE if file.metadata.get("format") in FORMATS else detect_layout(file.state, file.path)


def detect_layout(state: dict[str, torch.Tensor], source: Path | str) -> Layout:
    """The layout of ``state``, from its keys; raises naming the known layouts if none matches."""
    keys = set(state)
    for layout in LAYOUTS:
        if layout.matches(keys):
            return layout
    shown = ", ".join(sorted(keys)[:SHOWN]) + (" ..." if len(keys) > SHOWN else "")
    known = "; ".join(f"{layout.name} ({layout.description})" for layout in LAYOUTS)
    raise CheckpointError(
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
    resize: Resize | None = None,
    resize_head: bool = False,
    advise: Advisor | None = None,
) -> tuple[dict[str, torch.Tensor], LoadResult]:
    """The model's full state dict with the checkpoint's weights in place; raises listing every problem, with
    advice that was tried (``advise``: what else to build, e.g. the presets the file fits, each tried on the meta
    device by :func:`.guess.preset_advice`)."""
    check_arch(model_arch(model), layout, source)
    if resize not in (None, *RESIZES):
        raise CheckpointError(f"unknown resize {resize!r}; valid values: {', '.join(RESIZES)} (or None: the layout's)")
    left = dict(state)
    target = Target(model, source, resample, resize or layout.resize)
    weights = layout.convert(left, target)
    own = model.state_dict()
    drop = list(drop)
    # "head" may match nothing: callers drop the classifier of headless hosts and files alike
    unmatched = [p for p in drop if p != "head" and not any(_matches([p], k) for k in (*own, *weights, *left))]
    if unmatched:
        tops = sorted({k.split(".")[0] for k in own})
        raise CheckpointError(
            f"drop pattern(s) {', '.join(map(repr, unmatched))} match no parameter of the model and no key of "
            f"checkpoint {source}; the model's parameters start with {', '.join(tops)} (a name, a prefix such as "
            "'head', or a shell pattern such as '*.relative.*')"
        )
    if (
        resize_head
        and "head.weight" in weights
        and "head.weight" in own
        and weights["head.weight"].shape != own["head.weight"].shape
    ):
        LOG.info(
            f"checkpoint {source}: its classifier has {weights['head.weight'].shape[0]} outputs, the model's "
            f"{own['head.weight'].shape[0]}; the head is re-initialised"
        )
        drop += ["head", "head_dist"]
    dropped = sorted(k for k in own if _matches(drop, k))
    _check_drop(drop, dropped, weights, own, source)
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
        f"{k} (checkpoint {_stored_shape(k, weights[k], target)}, model {tuple(v.shape)})"
        for k, v in own.items()
        if k in weights and weights[k].shape != v.shape
    ]
    if shapes:
        problems.append(f"shapes that differ: {_listed(shapes)}")
    if problems:
        advice = _advice(weights, own) if len(problems) == 1 and shapes else ""
        if not advice and advise is not None and layout.suggests_presets:
            advice = advise(state, layout, source) or layout.hint(unmapped)
        elif not advice:
            advice = layout.hint(unmapped)
        raise CheckpointError(
            f"checkpoint {source} ({layout.name} layout) does not fit this {model_arch(model)!r} model: "
            + "; ".join(problems)
            + (f". {advice}" if advice else "")
        )
    merged = {k: weights.get(k, v) for k, v in own.items()}
    return merged, LoadResult(layout.name, dropped)


def _stored_shape(key: str, weight: torch.Tensor, target: Target) -> str:
    """The shape ``key`` has in the file: a table fitted to the model's grid is named by its own key and shape."""
    if key not in target.origins:
        return str(tuple(weight.shape))
    source_key, shape = target.origins[key]
    return f"{source_key} {shape}" + (f", fitted to {tuple(weight.shape)}" if tuple(weight.shape) != shape else "")


def check_arch(arch: str, layout: Layout, source: Path | str) -> None:
    """Raise unless models of host ``arch`` can take checkpoints in ``layout``."""
    if layout.archs and arch not in layout.archs:
        raise CheckpointError(
            f"checkpoint {source} is a {layout.description} checkpoint; it cannot load into a "
            f"{arch!r} model. Create a model of the same family ({', '.join(layout.archs)})"
        )


def _advice(weights: dict[str, torch.Tensor], own: dict[str, torch.Tensor]) -> str:
    """How to load a file whose only difference from the model is its classifier's class count, else ""."""
    differ = [k for k, v in own.items() if k in weights and weights[k].shape != v.shape]
    if not differ or any(k.split(".")[0] not in ("head", "head_dist") for k in differ):
        return ""
    if any(weights[k].shape[1:] != own[k].shape[1:] or weights[k].shape[0] == own[k].shape[0] for k in differ):
        return ""  # another width, not another class count: num_classes would not make it load
    count = str(weights[differ[0]].shape[0])
    keep, other = setting("num_classes", count), setting("num_classes", "N")
    if not on_command_line():
        keep, other = f"{keep} to create_model", f"{other} (or drop=('head',))"
    return (
        f"The classifier differs: pass {keep} to load the checkpoint's {count}-class classifier, "
        f"or {other} to re-initialise it"
    )


def _check_drop(
    drop: list[str], dropped: list[str], weights: dict[str, torch.Tensor], own: dict[str, torch.Tensor], source: object
) -> None:
    """Refuse a ``drop`` that would keep at their initialisation parameters the file holds values for (the
    classifier aside): the load would then differ from the file's model without a word."""
    kept = [
        k
        for k in dropped
        if k in weights and weights[k].shape == own[k].shape and k.split(".")[0] not in ("head", "head_dist")
    ]
    if kept:
        raise CheckpointError(
            f"drop={tuple(drop)!r} would keep {_listed(kept)} at their initialisation, although checkpoint {source} "
            "holds values for them of the model's shapes; leave them out of drop, which then loads them"
        )


def model_arch(model: nn.Module) -> str:
    """The host name of a vitpos model."""
    return getattr(getattr(model, "cfg", None), "arch", type(model).__name__)


def released_config(cfg: HostConfig, layout: Layout, file: WeightsFile, keep_join: bool = False) -> HostConfig:
    """``cfg`` with the options that reproduce the released forward pass of ``file``: its layout's, and a
    join its stored training arguments name.

    ``keep_join``: ``cfg``'s join was asked for by the caller. It is kept where the file does not
    name a join (a bare LaPE state dict cannot tell its repository's two forms apart), and refused
    where the file names another.
    """
    released = layout.file_config(layout.released_config(cfg), file.state)
    stored = released_join(file.args)
    if stored is not None:
        released = released.replace(join=stored)
    if not keep_join or released.position.join == cfg.position.join:
        return released
    if stored is not None:
        raise CheckpointError(
            f"checkpoint {file.path} ({layout.name} layout) was trained with the join vitpos calls {stored!r} "
            f"(its stored training arguments say so), not {cfg.position.join!r}: give {setting('join', stored)} "
            "or leave the join out"
        )
    LOG.info(
        f"checkpoint {file.path}: join {cfg.position.join!r} as asked; its keys do not show which form wrote it "
        f"(the released code's default: {released.position.join!r})"
    )
    return released.replace(join=cfg.position.join)
