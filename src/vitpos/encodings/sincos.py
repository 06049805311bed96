"""Fixed sinusoidal tables (pure functions): Vaswani et al. 1-D and the thesis's 2-D layout."""

from __future__ import annotations

import torch

from ..grid import Grid, grid_coords

__all__ = ["sincos_frequencies", "interleave_sin_cos", "sincos_1d", "sincos_2d"]


def sincos_frequencies(num: int, step: float, *, base: float = 10000.0, device=None) -> torch.Tensor:
    """Frequencies ``1 / base**(step*i)`` for i = 0..num-1, in float64."""
    i = torch.arange(num, dtype=torch.float64, device=device)
    return base ** (-step * i)


def interleave_sin_cos(angles: torch.Tensor) -> torch.Tensor:
    """(..., K) angles -> (..., 2K) channels [sin a0, cos a0, sin a1, cos a1, ...]."""
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)


def sincos_1d(positions: torch.Tensor, dim: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/D)), PE(pos, 2i+1) = cos(...); shape (len, D)."""
    if dim % 2:
        raise ValueError(f"sincos1d needs an even embedding width, got {dim}")
    freqs = sincos_frequencies(dim // 2, 2.0 / dim, device=positions.device)
    return interleave_sin_cos(positions.to(torch.float64)[:, None] * freqs)


def sincos_2d(grid: Grid, dim: int, *, device=None) -> torch.Tensor:
    """Thesis Eq. 1: first D/2 channels encode x, last D/2 encode y, sin/cos interleaved at
    frequencies 1/10000^(4i/D); shape (H*W, D), float64."""
    if dim % 4:
        raise ValueError(f"sincos2d needs an embedding width divisible by 4, got {dim}")
    coords = grid_coords(grid, device=device, dtype=torch.float64)
    freqs = sincos_frequencies(dim // 4, 4.0 / dim, device=device)
    x_part = interleave_sin_cos(coords[:, :1] * freqs)
    y_part = interleave_sin_cos(coords[:, 1:] * freqs)
    return torch.cat([x_part, y_part], dim=-1)
