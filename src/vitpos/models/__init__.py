"""Model hosts, presets and the factory."""

from . import ceit, compact, presets, pvt, swin, t2t, vit  # noqa: F401  (registration)
from .factory import create_model, get_config, list_models
from .host import Host
from .pyramid import PyramidTransformer
from .vit import VisionTransformer

__all__ = ["create_model", "get_config", "list_models", "Host", "PyramidTransformer", "VisionTransformer"]
