"""Semantic segmentation: a Semantic FPN on the pyramid hosts, mIoU, and the training task."""

from .config import IGNORE_INDEX, SemanticFPNConfig
from .model import SemanticFPN

__all__ = ["IGNORE_INDEX", "SemanticFPN", "SemanticFPNConfig"]
