"""Shared fixtures: deterministic seeds and tiny model settings."""

import pytest
import torch

TINY = dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, num_classes=5)
"""A 4x4-grid model small enough for exhaustive parametrised tests."""


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)
