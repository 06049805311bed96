"""Helpers shared by the released-checkpoint tests."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

import vitpos


def save_pth(sd: dict, path: Path, entry: str | None = "model") -> Path:
    torch.save({entry: sd, "epoch": 3} if entry else sd, path)
    return path


def save_safetensors(sd: dict, path: Path) -> Path:
    save_file({k: v.contiguous() for k, v in sd.items()}, str(path))
    return path


def load_float64(name: str, path: Path, resize: str | None = None, **overrides) -> torch.nn.Module:
    """create_model(name, checkpoint=path) in float64: built with the released options, then loaded
    again after the cast so no weight passes through float32."""
    model = vitpos.create_model(name, checkpoint=path, resize=resize, **overrides).double()
    vitpos.load_weights(model, path, resize=resize, resize_head="num_classes" in overrides)
    return model.eval()


def images(size: int, batch: int = 2, seed: int = 1) -> torch.Tensor:
    return torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def assert_close(ours: torch.Tensor, reference: torch.Tensor) -> None:
    assert ours.shape == reference.shape
    assert reference.abs().max() > 1e-3  # a meaningful output, not all zero
    torch.testing.assert_close(ours, reference, rtol=1e-9, atol=1e-10)


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Every test here runs small models on one thread."""
