"""Start from released weights: timm/DeiT, iRPE, LaPE, Swin (Microsoft and timm) and PVT v1.

``vitpos.create_model(name, checkpoint=PATH)`` builds a preset with the released code's
options and loads the file; ``vitpos.load_checkpoint(model, PATH)`` loads into a model you
built. Files are read without running code; every load is strict and all-or-nothing.
"""

from .files import CheckpointLoadError, read_state_dict
from .loading import LAYOUTS, LoadResult, create_from_checkpoint, detect_layout, guess_preset, load_checkpoint

__all__ = [
    "CheckpointLoadError",
    "LAYOUTS",
    "LoadResult",
    "create_from_checkpoint",
    "detect_layout",
    "guess_preset",
    "load_checkpoint",
    "read_state_dict",
]
