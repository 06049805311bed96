"""Semantic segmentation: a Semantic FPN on the pyramid hosts, mIoU, and the training task."""

from . import presets  # noqa: F401  (registration)
from .config import IGNORE_INDEX, SemanticFPNConfig
from .model import SemanticFPN
from .task import SegmentationTask

__all__ = ["IGNORE_INDEX", "SemanticFPN", "SemanticFPNConfig", "SegmentationTask"]
