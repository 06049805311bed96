"""2-D rotary position embeddings (Heo et al., "Rotary Position Embedding for Vision Transformer",
ECCV 2024): queries and keys are rotated by angles that depend on the patch position, so their
dot product depends on the offset only and attention stays fused.

Slot string ``rope2d[:axial|:mixed][:theta=T]``:

* ``axial`` (default, theta 100) — channel pair t of the first half turns by x * f_t, of the
  second half by y * f_t, with f_t = theta^(-4t/d), t < d/4 (RoPE-Axial);
* ``mixed`` (theta 10) — pair t turns by x * fx_t + y * fy_t with learnable per-head, per-layer
  frequencies, initialised to the axial magnitudes at a random direction per head (RoPE-Mixed).

Channel pairs are adjacent (2t, 2t+1). Positions are integer patch coordinates (x = column,
y = row), so other grids extrapolate; prefix tokens are not rotated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from ...attention.terms import RelativeTerms, Rotation
from ...grid import Grid, GridCache, grid_coords
from ...registry import RELATIVE
from ...spec import SlotSpec, SpecError
from ..base import SlotContext
from .base import RelativePosition

__all__ = ["Rope2d", "axial_magnitudes"]

VARIANTS = ("axial", "mixed")
DEFAULT_THETA = {"axial": 100.0, "mixed": 10.0}


def axial_magnitudes(head_dim: int, theta: float, device=None) -> torch.Tensor:
    """f_t = theta^(-4t/d) for t < d/4, in float64."""
    return theta ** (-torch.arange(0, head_dim, 4, dtype=torch.float64, device=device)[: head_dim // 4] / head_dim)


def _cos_sin(angles: torch.Tensor) -> torch.Tensor:
    return torch.stack([angles.cos(), angles.sin()])


def _theta(text: str) -> float:
    value = float(text)
    if not (value > 0 and math.isfinite(value)):
        raise ValueError("theta must be a positive number")
    return value


@RELATIVE.register("rope2d")
class Rope2d(RelativePosition):
    """RoPE-Axial or RoPE-Mixed on every attention layer; see the module docstring."""

    def __init__(self, ctx: SlotContext, variant: str = "axial", theta: float | None = None) -> None:
        super().__init__()
        d = ctx.head_dim
        if d % 4:
            raise ValueError(f"rope2d rotates x and y channel pairs and needs a head width divisible by 4, got {d}")
        self.variant = variant
        self.head_dim = d
        self.theta = DEFAULT_THETA[variant] if theta is None else theta
        if variant == "mixed":
            magnitudes = axial_magnitudes(d, self.theta)
            direction = torch.rand(ctx.num_heads, 1, dtype=torch.float64) * 2 * math.pi
            fx = torch.cat([magnitudes * direction.cos(), magnitudes * (direction + math.pi / 2).cos()], dim=-1)
            fy = torch.cat([magnitudes * direction.sin(), magnitudes * (direction + math.pi / 2).sin()], dim=-1)
            self.mixed_freqs: nn.Parameter | None = nn.Parameter(torch.stack([fx, fy]).float())  # 2, heads, d/2
        else:
            self.mixed_freqs = None
        self._cache: GridCache[torch.Tensor] = GridCache()

    @classmethod
    def parse(cls, spec: SlotSpec) -> Mapping[str, Any]:
        spec.check_no_placement()
        spec.check_flags(set(VARIANTS))
        if len(spec.flags) > 1:
            raise SpecError(f"'{spec}': choose one of {', '.join(VARIANTS)}")
        theta = spec.typed_options({"theta": _theta}).get("theta")
        return {"variant": spec.flags[0] if spec.flags else "axial", "theta": theta}

    def frequencies(self, device=None) -> torch.Tensor:  # 2, heads or 1, d/2
        """(fx, fy) of every channel pair: learned (mixed) or the fixed axial ones in float64."""
        if self.mixed_freqs is not None:
            return self.mixed_freqs
        magnitudes = axial_magnitudes(self.head_dim, self.theta, device)
        zeros = torch.zeros_like(magnitudes)
        return torch.stack([torch.cat([magnitudes, zeros]), torch.cat([zeros, magnitudes])])[:, None]

    def angles(self, grid: Grid, device=None) -> torch.Tensor:  # heads or 1, H*W, d/2
        """The rotation angle of every channel pair at every cell of ``grid``."""
        fx, fy = self.frequencies(device).unbind(0)
        coords = grid_coords(grid, device=fx.device, dtype=fx.dtype)  # H*W, (x, y)
        return coords[:, :1] * fx[:, None, :] + coords[:, 1:] * fy[:, None, :]

    def cos_sin(self, grid: Grid, device=None) -> torch.Tensor:  # 2, heads or 1, H*W, d/2
        """cos and sin of :meth:`angles`, cached per grid while the frequencies are unchanged (recomputing
        them costs about 2% of a DeiT-S inference forward: ``python -m bench.attention.caches``)."""
        params = [] if self.mixed_freqs is None else [self.mixed_freqs]
        key = (tuple(grid), None if device is None else torch.device(device))
        return self._cache.get(key, lambda: _cos_sin(self.angles(grid, device)), params)

    def relative_terms(self, grid: Grid, num_prefix_tokens: int, device=None) -> RelativeTerms:
        return RelativeTerms(rotation=Rotation(self.cos_sin(grid, device), num_prefix_tokens))

    def extra_repr(self) -> str:
        return f"variant={self.variant}, theta={self.theta}"
