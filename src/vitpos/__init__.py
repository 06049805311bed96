"""vitpos: position encodings for vision transformers, in four composable slots.

The public names load on first use (PEP 562), so ``import vitpos`` and ``vitpos --help`` stay
light; the slot and model registries fill themselves on their first lookup.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "CheckpointError": "vitpos.errors",
    "Host": "vitpos.models",
    "HostConfig": "vitpos.config",
    "ModelConfig": "vitpos.config",
    "PositionConfig": "vitpos.config",
    "PVTConfig": "vitpos.config",
    "PyramidConfig": "vitpos.config",
    "SwinConfig": "vitpos.config",
    "ViTConfig": "vitpos.config",
    "SlotSpec": "vitpos.spec",
    "SpecError": "vitpos.spec",
    "VitposError": "vitpos.errors",
    "ConfigError": "vitpos.errors",
    "VisionTransformer": "vitpos.models",
    "create_model": "vitpos.weights",
    "get_config": "vitpos.models",
    "list_models": "vitpos.models",
    "load_checkpoint": "vitpos.weights",
    "load_model": "vitpos.weights",
    "load_weights": "vitpos.weights",
    "relative_buckets": "vitpos.encodings.relative",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'vitpos' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
