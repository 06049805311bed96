"""Shared fixtures: deterministic seeds, one core's threads per test process, tiny model settings."""

import os

import pytest
import torch


def pytest_configure(config: pytest.Config) -> None:
    """Under ``pytest -n N`` each of the N test processes gets its share of the cores (intra-op threads of
    torch and of the subprocesses it starts): more threads than cores only make the processes contend."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers and "OMP_NUM_THREADS" not in os.environ:  # a thread count set by hand stands
        share = max(1, len(os.sched_getaffinity(0)) // workers)
        os.environ["OMP_NUM_THREADS"] = str(share)
        torch.set_num_threads(share)


TINY = dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, num_classes=5)
"""A 4x4-grid model small enough for exhaustive parametrised tests."""


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


@pytest.fixture
def one_thread():
    """Tiny models gain nothing from intra-op threads, and lose much when cores are shared."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def float64():
    """float64 as the default dtype, for equality with a reference to rounding."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


TINY_PVT = dict(
    arch="pvt",
    img_size=32,
    patch_size=2,
    embed_dims=(8, 16, 24, 32),
    depths=(1, 2, 1, 1),
    num_heads=(1, 2, 3, 4),
    mlp_ratios=(2.0, 2.0, 2.0, 2.0),
    sr_ratios=(4, 2, 1, 1),
    num_classes=5,
)
"""A four-stage PVT with stride 16: grids 16x16 ... 2x2 at 32x32."""

TINY_SWIN = dict(
    arch="swin",
    img_size=32,
    patch_size=2,
    embed_dims=(8, 16, 32, 64),
    depths=(2, 2, 1, 1),
    num_heads=(1, 2, 2, 4),
    mlp_ratios=(2.0, 2.0, 2.0, 2.0),
    window_size=3,
    num_classes=5,
)
"""A four-stage Swin with stride 16 and 3x3 windows: grids 16x16 (padded, shifted) ... 2x2."""
