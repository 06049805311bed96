"""vitpos: position encodings for vision transformers, in four composable slots."""

from . import encodings  # noqa: F401  (fills the slot registries before any config is built)
from .config import ModelConfig, PositionConfig
from .encodings.relative import relative_buckets
from .models import VisionTransformer, create_model, get_config, list_models
from .pyramid_config import PyramidConfig
from .released import CheckpointLoadError, load_checkpoint
from .spec import SlotSpec, SpecError

__version__ = "0.1.0"

__all__ = [
    "CheckpointLoadError",
    "ModelConfig",
    "PositionConfig",
    "PyramidConfig",
    "SlotSpec",
    "SpecError",
    "VisionTransformer",
    "create_model",
    "get_config",
    "list_models",
    "load_checkpoint",
    "relative_buckets",
]
