"""Serialisable model configs: the four position slots, resolved once, and each host's config.

* :mod:`.position` — :class:`PositionConfig` (each slot parsed once into typed options) and
  :class:`SlotContext`, what a slot module is built from;
* :mod:`.host` — :class:`HostConfig`, the fields every host shares, and :class:`StageGeometry`;
* :mod:`.vit` — :class:`ViTConfig` (earlier name: ``ModelConfig``);
* :mod:`.compact` — :class:`CompactConfig` (ViT-Lite, CVT, CCT); :mod:`.t2t` — :class:`T2TConfig`;
  :mod:`.ceit` — :class:`CeiTConfig`;
* :mod:`.pyramid` — :class:`PVTConfig`, :class:`SwinConfig` and their shared :class:`PyramidConfig`.
"""

from .ceit import CeiTConfig
from .compact import CompactConfig
from .host import HEADS, HostConfig, StageGeometry
from .position import SLOT_NAMES, PositionConfig, ResolvedSlot, SlotClass, SlotContext, slot_registry
from .pyramid import PYRAMID_ARCHS, PYRAMID_CONFIGS, PVTConfig, PyramidConfig, SwinConfig
from .t2t import T2TConfig
from .vit import ModelConfig, ViTConfig

HOST_CONFIGS: tuple[type[HostConfig], ...] = (ViTConfig, CompactConfig, T2TConfig, CeiTConfig, PVTConfig, SwinConfig)
"""The config class of every backbone host (the command line offers the union of their fields)."""

__all__ = [
    "PositionConfig",
    "ResolvedSlot",
    "SlotClass",
    "SlotContext",
    "HostConfig",
    "StageGeometry",
    "ViTConfig",
    "ModelConfig",
    "CompactConfig",
    "T2TConfig",
    "CeiTConfig",
    "HEADS",
    "PyramidConfig",
    "PVTConfig",
    "SwinConfig",
    "HOST_CONFIGS",
    "PYRAMID_ARCHS",
    "PYRAMID_CONFIGS",
    "SLOT_NAMES",
    "slot_registry",
]
