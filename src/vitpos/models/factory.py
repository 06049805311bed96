"""create_model / list_models / get_config: presets by name, with slot and field overrides."""

from __future__ import annotations

import copy
import fnmatch
from typing import Any

from torch import nn

from ..config import HostConfig
from ..errors import ConfigError, VitposError, quote
from ..registry import ARCHITECTURES, MODELS

__all__ = ["create_model", "list_models", "get_config", "config_from_dict", "preset_task", "TASKS"]


def get_config(name: str | HostConfig, **overrides: Any) -> HostConfig:
    """The config of preset ``name`` (a fresh copy) with ``overrides`` applied."""
    if not isinstance(name, (str, HostConfig)):
        raise ConfigError(
            "a model is named by a preset (a string, see list_models()) or a config (ViTConfig, PVTConfig, "
            "SwinConfig, ...), "
            f"got {name!r} ({type(name).__name__})"
        )
    base = MODELS.get(name) if isinstance(name, str) else name
    cfg = copy.deepcopy(base)
    return cfg.replace(**overrides) if overrides else cfg


def create_model(name: str | HostConfig, **overrides: Any) -> nn.Module:
    """Build a model from a preset name or a config, with freshly initialised weights.

    ``overrides`` are model fields (``num_classes=10``, ``head="gap"``) or slot values by their
    short string (``absolute="sincos2d"``, ``relative="irpe:product:ctx:k"``). For a model with
    weights (a checkpoint, or ``pretrained=True``) use :func:`vitpos.create_model`, which wraps this one.
    """
    return get_config(name, **overrides).build()


TASKS = ("classification", "detection", "segmentation")
"""What presets predict: one output vector per image (classification, or regression with its
head resized), objects (the DETR presets), or a class per pixel (the Semantic FPN presets)."""


def preset_task(name: str) -> str:
    """What preset ``name`` predicts: one of :data:`TASKS`."""
    return getattr(MODELS.get(name), "task", "classification")


def list_models(pattern: str = "*", task: str | None = None) -> list[str]:
    """Preset names matching ``pattern``: a shell-style filter (``"deit*"``), or a bare word as a part of
    the name (``"deit"``, as ``vitpos models deit``); ``task`` keeps those of one task (:data:`TASKS`)."""
    if not isinstance(pattern, str):
        raise VitposError(f"list_models: pattern must be a string such as 'deit*', got {quote(pattern)}")
    if task is not None and task not in TASKS:
        raise ValueError(f"unknown task {task!r}; valid tasks: {', '.join(TASKS)}")
    if not any(c in pattern for c in "*?["):
        pattern = f"*{pattern}*"
    return [n for n in MODELS.names() if fnmatch.fnmatch(n, pattern) and task in (None, preset_task(n))]


def config_from_dict(data: dict[str, Any]) -> HostConfig:
    """A model config from its ``to_dict()`` form, of the class its host reads (``config_class``;
    a mapping without ``arch`` is a plain ViT's)."""
    arch = data.get("arch", "vit") if isinstance(data, dict) else "vit"  # from_dict names a non-mapping
    return ARCHITECTURES.get(arch).config_class.from_dict(data)
