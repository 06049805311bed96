"""Tiny Semantic FPN configs on the tiny pyramid hosts of the shared test settings."""

from __future__ import annotations

from tests.conftest import TINY_PVT, TINY_SWIN
from vitpos.tasks.segmentation import SemanticFPNConfig

TINY_HEAD = dict(fpn_dim=16, head_dim=16, norm_groups=4, num_classes=3)
"""An FPN of 16 channels and a head of 16 (4 GroupNorm groups) for 3 classes."""


def tiny_fpn(backbone: str = "pvt", **overrides) -> SemanticFPNConfig:
    """A Semantic FPN on the tiny PVT or Swin (stride 16) with ``overrides``."""
    host = {"pvt": TINY_PVT, "swin": TINY_SWIN}[backbone]
    return SemanticFPNConfig(**{**host, "arch": "semantic_fpn", "backbone": backbone, **TINY_HEAD}).replace(**overrides)
