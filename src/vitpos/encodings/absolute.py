"""Absolute encodings: one signal per grid cell, ``forward(grid) -> (1, H*W, D)`` at any grid.

Prefix (class/register) tokens are never part of the grid; an encoding may own a separate
learned vector per prefix token (DeiT's class-token position embedding), exposed by
:meth:`AbsoluteEncoding.prefix`.

In a padded batch every encoding is evaluated at each image's own valid grid and placed at its
top left (:func:`vitpos.encodings.join.padded_additions`): DETR's sine is then normalised over
the valid region, as DETR's code does; a learned table is resampled to the valid grid, which is
vitpos's choice (PVT's detection code resamples it to the padded batch's grid, so an image's
encoding there depends on its batch), made so that a padded image equals the image alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from torch import nn

from ..grid import Grid, grid_coords, resample_table
from ..registry import ABSOLUTE
from ..spec import SlotSpec, int_in, one_of, positive_float
from .base import OptionSchema, SlotContext, SlotEntry
from .sincos import interleave_sin_cos, sincos_1d, sincos_2d, sincos_frequencies

__all__ = [
    "AbsoluteEncoding",
    "FixedTableEncoding",
    "NoAbsolute",
    "LearnedPosition",
    "SinCos1dPosition",
    "SinCos2dPosition",
    "LearnableSinCosPosition",
    "FourierPosition",
]


class AbsoluteEncoding(SlotEntry, nn.Module):
    """Base class: a per-cell position signal of width ``embed_dim`` for any grid."""

    learned_table = False
    """True for encodings that own a free (H*W, D) table, which per-layer joins can copy."""

    def __init__(self, ctx: SlotContext) -> None:
        super().__init__()
        self.embed_dim = ctx.embed_dim
        h, w = ctx.grid
        self.native_grid: Grid = (h, w)
        self.num_prefix_tokens = ctx.num_prefix_tokens

    def forward(self, grid: Grid) -> torch.Tensor:  # 1, H*W, D
        """The encoding of every cell of ``grid`` in row-major order."""
        raise NotImplementedError

    def prefix(self) -> torch.Tensor | None:  # 1, P, D
        """Learned vectors for the prefix tokens, or ``None`` if prefix tokens get no signal."""
        return None

    def with_prefix(self, grid: Grid) -> torch.Tensor:  # 1, P + H*W, D
        """The encoding for the whole token sequence; prefix rows are zero unless learned."""
        cells = self(grid)
        if self.num_prefix_tokens == 0:
            return cells
        prefix = self.prefix()
        if prefix is None:
            prefix = cells.new_zeros(1, self.num_prefix_tokens, cells.shape[-1])
        return torch.cat([prefix, cells], dim=1)


class FixedTableEncoding(AbsoluteEncoding):
    """Base of the parameter-free encodings: a table computed in float64 at every call, then cast
    to the module's device and dtype (those of ``_anchor``, an empty buffer that follows ``.to()``)."""

    _anchor: torch.Tensor

    def __init__(self, ctx: SlotContext) -> None:
        super().__init__(ctx)
        self.register_buffer("_anchor", torch.empty(0), persistent=False)

    def forward(self, grid: Grid) -> torch.Tensor:
        return self.float64_table(grid, self._anchor.device).to(self._anchor.dtype)[None]

    def float64_table(self, grid: Grid, device=None) -> torch.Tensor:  # H*W, D in float64
        """The float64 table of ``grid`` on ``device``."""
        raise NotImplementedError


@ABSOLUTE.register("none")
class NoAbsolute(SlotEntry):
    """No absolute signal."""

    @classmethod
    def build(cls, ctx: SlotContext, options: Mapping[str, Any], **host: Any) -> None:
        return None


@ABSOLUTE.register("learned")
class LearnedPosition(AbsoluteEncoding):
    """A free table (ViT/DeiT): trunc-normal std 0.02; each prefix token has its own vector.

    ``std`` sets the initial standard deviation (``learned:std=1`` for the N(0, 1) start of many
    small-scale ViT codes; truncation stays at ±2 in absolute value, as timm's). ``noprefix``
    (``learned:noprefix``) gives prefix tokens no vector and no signal: the table covers the grid
    only, as DeiT III's and RoPE-ViT's ``pos_embed`` (1, H*W, D). At a grid other than the native
    one the table is resampled bicubically.
    """

    learned_table = True
    _schema: ClassVar[OptionSchema] = {"std": positive_float}

    def __init__(self, ctx: SlotContext, std: float = 0.02, noprefix: bool = False) -> None:
        super().__init__(ctx)
        h, w = self.native_grid
        self.table = nn.Parameter(torch.empty(1, h * w, ctx.embed_dim))
        nn.init.trunc_normal_(self.table, std=std)
        if ctx.num_prefix_tokens and not noprefix:
            self.prefix_table: nn.Parameter | None = nn.Parameter(torch.empty(1, ctx.num_prefix_tokens, ctx.embed_dim))
            nn.init.trunc_normal_(self.prefix_table, std=std)
        else:
            self.prefix_table = None

    @classmethod
    def parse(cls, spec: SlotSpec) -> Mapping[str, Any]:
        spec.check_no_placement()
        spec.check_flags({"noprefix"})
        return {"noprefix": "noprefix" in spec.flags, **spec.typed_options(cls._schema)}

    def forward(self, grid: Grid) -> torch.Tensor:
        return resample_table(self.table, self.native_grid, grid)

    def prefix(self) -> torch.Tensor | None:
        return self.prefix_table


@ABSOLUTE.register("sincos1d")
class SinCos1dPosition(FixedTableEncoding):
    """Vaswani et al.'s fixed 1-D encoding over the row-major patch index.

    By default the cells are positions 0 .. H*W-1 and prefix tokens get no signal. ``prefix``
    (``sincos1d:prefix``) counts the prefix tokens as the first positions, so the cells start at P:
    the table T2T-ViT's released code adds (its class token at position 0).
    """

    def __init__(self, ctx: SlotContext, prefix: bool = False) -> None:
        super().__init__(ctx)
        self.offset = ctx.num_prefix_tokens if prefix else 0

    @classmethod
    def parse(cls, spec: SlotSpec) -> Mapping[str, Any]:
        spec.check_no_placement()
        spec.check_flags({"prefix"})
        return {"prefix": "prefix" in spec.flags, **spec.typed_options(cls._schema)}

    def float64_table(self, grid: Grid, device=None) -> torch.Tensor:
        positions = torch.arange(self.offset, self.offset + grid[0] * grid[1], device=device)
        return sincos_1d(positions, self.embed_dim)

    def prefix(self) -> torch.Tensor | None:
        if not self.offset:
            return None
        table = sincos_1d(torch.arange(self.offset, device=self._anchor.device), self.embed_dim)
        return table.to(self._anchor.dtype)[None]


@ABSOLUTE.register("sincos2d")
class SinCos2dPosition(FixedTableEncoding):
    """The thesis's fixed 2-D encoding (Eq. 1): x in the first half, y in the second."""

    def float64_table(self, grid: Grid, device=None) -> torch.Tensor:
        return sincos_2d(grid, self.embed_dim, device=device)


@ABSOLUTE.register("learnable_sincos")
class LearnableSinCosPosition(AbsoluteEncoding):
    """The thesis §5.2: raw (x, y) through a trained W in R^{D/2 x 2}, then sin/cos interleaved.

    W starts at the ``sincos2d`` frequencies (Eq. 6), so at initialisation the output equals
    ``sincos2d`` exactly.
    """

    def __init__(self, ctx: SlotContext) -> None:
        super().__init__(ctx)
        if ctx.embed_dim % 4:
            raise ValueError(f"learnable_sincos needs an embedding width divisible by 4, got {ctx.embed_dim}")
        quarter = ctx.embed_dim // 4
        freqs = sincos_frequencies(quarter, 4.0 / ctx.embed_dim).float()
        weight = torch.zeros(2 * quarter, 2)
        weight[:quarter, 0] = freqs
        weight[quarter:, 1] = freqs
        self.weight = nn.Parameter(weight)

    def forward(self, grid: Grid) -> torch.Tensor:
        coords = grid_coords(grid, device=self.weight.device, dtype=self.weight.dtype)
        return interleave_sin_cos(coords @ self.weight.t())[None]


@ABSOLUTE.register("fourier")
class FourierPosition(AbsoluteEncoding):
    """Learnable Fourier features (Li et al., NeurIPS 2021), as the thesis uses them (Eq. 3).

    r = 1/sqrt(F) * [cos(x Wr^T) || sin(x Wr^T)] over raw patch coordinates x = (col, row),
    Wr in R^{F/2 x 2}, then an MLP (Linear F->hidden, GELU, Linear hidden->D).

    We read N(0, gamma^-2) as a *variance* of gamma^-2 (std 1/gamma), which makes r_x . r_y
    approximate a Gaussian kernel of width ~gamma in patches (thesis Eq. 4). Li et al.'s
    released code uses gamma^-2 as the standard deviation instead: ``fourier:init=std``.
    Options: ``gamma`` (default 10), ``dim`` = F (default D), ``hidden`` (default 32), ``scale``
    (default 1, the paper's): a factor on the output. With PyTorch's default MLP initialisation the
    cells' encodings differ by a standard deviation of about 0.01 (a learned table's: 0.02 to 1), a
    position signal too faint for a small model to pick up; ``scale=10`` lifts it to about 0.1.
    """

    _schema: ClassVar[OptionSchema] = {
        "gamma": positive_float,
        "dim": int_in(1, 65536),
        "hidden": int_in(1, 65536),
        "init": one_of("variance", "std"),
        "scale": positive_float,
    }

    def __init__(
        self,
        ctx: SlotContext,
        gamma: float = 10.0,
        dim: int | None = None,
        hidden: int = 32,
        init: str = "variance",
        scale: float = 1.0,
    ) -> None:
        super().__init__(ctx)
        dim = dim or ctx.embed_dim
        if dim % 2 or dim <= 0 or gamma <= 0 or hidden <= 0:
            raise ValueError(
                f"fourier needs an even dim > 0, gamma > 0 and hidden > 0 (dim={dim}, gamma={gamma}, hidden={hidden})"
            )
        self.gamma, self.fourier_dim, self.init_mode, self.scale = gamma, dim, init, scale
        self.wr = nn.Linear(2, dim // 2, bias=False)
        std = 1.0 / gamma if init == "variance" else gamma**-2
        nn.init.normal_(self.wr.weight, mean=0.0, std=std)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, ctx.embed_dim))

    def features(self, grid: Grid) -> torch.Tensor:  # H*W, F
        """The Fourier features r of every cell (before the MLP)."""
        coords = grid_coords(grid, device=self.wr.weight.device, dtype=self.wr.weight.dtype)
        proj = self.wr(coords)
        return torch.cat([proj.cos(), proj.sin()], dim=-1) / math.sqrt(self.fourier_dim)

    def forward(self, grid: Grid) -> torch.Tensor:
        return self.scale * self.mlp(self.features(grid))[None]
