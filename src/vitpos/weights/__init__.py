"""Weights: the vitpos checkpoint format, every released layout, one loader, pretrained downloads.

``vitpos.create_model(name, checkpoint=PATH)`` builds a preset with the released code's
options and loads the file; ``pretrained=True`` fetches the authors' released file first;
``vitpos.load_weights(model, PATH)`` loads into a model you built. Files are read without
running code; every load is strict and all-or-nothing; every problem is a :class:`CheckpointError`.
This package sits above ``models`` and below ``engine``: nothing it imports imports it.
"""

from ..errors import CheckpointError
from .apply import load_weights
from .build import create_model, guess_model, guess_preset, load_model
from .export import write_checkpoint
from .files import WeightsFile, read_state_dict, read_weights
from .load import LAYOUTS, LoadResult, detect_layout
from .pretrained import RELEASES, pretrained_models
from .run_folder import SavedModel, find_checkpoint, latest_checkpoint, read_saved_model

load_checkpoint = load_weights
"""The name the README showed before :func:`load_weights`; the same function."""

__all__ = [
    "CheckpointError",
    "LAYOUTS",
    "LoadResult",
    "RELEASES",
    "SavedModel",
    "WeightsFile",
    "create_model",
    "detect_layout",
    "find_checkpoint",
    "guess_model",
    "guess_preset",
    "latest_checkpoint",
    "load_checkpoint",
    "load_model",
    "load_weights",
    "pretrained_models",
    "read_saved_model",
    "read_state_dict",
    "read_weights",
    "write_checkpoint",
]
