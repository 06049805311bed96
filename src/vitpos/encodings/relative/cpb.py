"""Swin V2's log-spaced continuous position bias (Liu et al., CVPR 2022, §3.3): ``relative=cpb``.

A small network maps the offset (dy, dx) between query and key to a bias per head, so one set of
weights serves every window and grid size. For a grid (or window) of H x W cells, as Swin V2's
released code computes it (the form every Swin V2 checkpoint was trained with; the paper's Eq. 4
writes the log-spacing of the raw offset, without the normalisation and the bound):

    u = 8 dy / (S_y - 1),  v = 8 dx / (S_x - 1)          offsets normalised to [-8, 8]
    û = sign(u) log2(1 + |u|) / log2(8)                  log-spaced (the same for v)
    b(dy, dx) = 16 sigmoid(W2 ReLU(W1 (û, v̂) + b1))       a logit per head, in (0, 16)

with W1 (512 x 2, with a bias) and W2 (heads x 512, without one). (S_y, S_x) is the grid the
attention runs on (the window under Swin, shrunk where a stage is smaller than it, as Swin V2
does; the whole grid under global attention), or ``pretrained=S`` on both axes: the window the
weights were trained with, so that a larger window keeps the trained scale and extrapolates (Swin
V2's ``pretrained_window_size``). Pairs that involve a prefix token get one extra learned logit
per head, through the same 16 sigmoid (zero at start: the value of an MLP output near zero), as
the bucketed encodings give them one extra bucket. The linear layers start as timm's: trunc-normal
weights (std 0.02), zero bias.

The bias is declared as a table per offset with the offsets' ids (:class:`RelativeTerms`), so
every attention path and the CUDA policy treat it as the Swin bias table.
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch
from torch import nn

from ...attention.terms import RelativeTerms
from ...grid import Grid, GridCache, grid_offsets
from ...padding import Padding
from ...registry import RELATIVE
from ...spec import int_in
from ..base import OptionSchema, SlotContext
from .base import RelativeBias

__all__ = ["ContinuousPositionBias", "log_spaced_offsets", "offset_ids"]

HIDDEN = 512
"""Width of the bias network's hidden layer (Swin V2)."""
SPAN = 8.0
"""Normalised offsets lie in [-SPAN, SPAN] before the log-spacing."""
BIAS_RANGE = 16.0
"""The bias is BIAS_RANGE sigmoid(.): a logit in (0, 16)."""
MAX_PRETRAINED = 1024
"""The largest ``pretrained`` window side: a bound that catches typos, far beyond any release."""


def log_spaced_offsets(grid: Grid, spans: Grid | None = None, device=None) -> torch.Tensor:
    """The network's inputs (û, v̂) for every offset of ``grid``: ((2H-1)(2W-1), 2) float64, offsets
    (dy, dx) from -(H-1) to H-1 row-major, normalised by ``spans`` - 1 (default: the grid's sides)."""
    h, w = grid
    sy, sx = spans if spans is not None else (h, w)
    dy = torch.arange(2 * h - 1, device=device, dtype=torch.float64) - (h - 1)
    dx = torch.arange(2 * w - 1, device=device, dtype=torch.float64) - (w - 1)
    offsets = torch.stack(torch.meshgrid(dy, dx, indexing="ij"), dim=-1).reshape(-1, 2)
    # a side of one cell has only the offset 0: any positive divisor keeps it at 0 (the release divides 0 by 0)
    divisor = torch.stack([torch.full((), s - 1, dtype=torch.float64, device=device) for s in (sy, sx)])
    scaled = offsets / divisor.clamp_min(1) * SPAN
    return torch.sign(scaled) * torch.log2(scaled.abs() + 1.0) / math.log2(SPAN)


def offset_ids(grid: Grid, num_prefix_tokens: int = 0, device=None) -> torch.Tensor:
    """(N, N) ids into :func:`log_spaced_offsets`' rows of every (query, key) pair, N = P + H*W; pairs
    with a prefix token get the id (2H-1)(2W-1), one past the offsets."""
    h, w = grid
    dy, dx = grid_offsets(grid, device=device).unbind(-1)  # query minus key
    ids = (dy + (h - 1)) * (2 * w - 1) + dx + (w - 1)
    p = num_prefix_tokens
    if not p:
        return ids
    # the id past the offsets as a filled tensor, not a padding value, which a trace would fix to one grid
    extra = torch.full((), (2 * h - 1) * (2 * w - 1), dtype=ids.dtype, device=ids.device)
    ids = torch.cat([extra.expand(ids.shape[0], p), ids], dim=1)
    return torch.cat([extra.expand(p, ids.shape[1]), ids], dim=0)


_IDS: GridCache[torch.Tensor] = GridCache(maxsize=64)
"""Shared by every layer: the ids depend only on the grid, prefix count and device."""


@RELATIVE.register("cpb")
class ContinuousPositionBias(RelativeBias):
    """Swin V2's continuous position bias: an MLP of the log-spaced offset, 16 sigmoid, per head."""

    _schema: ClassVar[OptionSchema] = {"pretrained": int_in(2, MAX_PRETRAINED)}

    def __init__(self, ctx: SlotContext, pretrained: int | None = None) -> None:
        super().__init__()
        self.num_heads = ctx.num_heads
        self.pretrained = pretrained
        first, second = nn.Linear(2, HIDDEN), nn.Linear(HIDDEN, ctx.num_heads, bias=False)
        for layer in (first, second):
            nn.init.trunc_normal_(layer.weight, std=0.02)
        nn.init.zeros_(first.bias)
        self.mlp = nn.Sequential(first, nn.ReLU(), second)
        self.prefix_logit = nn.Parameter(torch.zeros(ctx.num_heads)) if ctx.num_prefix_tokens else None
        self._inputs: GridCache[torch.Tensor] = GridCache()

    def extra_repr(self) -> str:
        return f"heads={self.num_heads}, pretrained={self.pretrained}"

    def bias_table(self, grid: Grid, num_prefix_tokens: int) -> torch.Tensor:
        """The logit of every offset of ``grid`` (then the prefix pairs' one): (heads, K)."""
        if num_prefix_tokens and self.prefix_logit is None:
            raise ValueError(
                f"this cpb encoding was built for a model without prefix tokens and has no logit for them, but got "
                f"num_prefix_tokens={num_prefix_tokens}; build it with the model's context"
            )
        weight = next(self.mlp.parameters())  # the first layer's: the inputs' device and dtype
        spans = None if self.pretrained is None else (self.pretrained, self.pretrained)
        key = (tuple(grid), spans, weight.device, weight.dtype)
        inputs = self._inputs.get(key, lambda: log_spaced_offsets(grid, spans, weight.device).to(weight.dtype))
        logits = self.mlp(inputs).transpose(0, 1)  # heads, (2H-1)(2W-1)
        if num_prefix_tokens:
            assert self.prefix_logit is not None  # checked above
            logits = torch.cat([logits, self.prefix_logit[:, None].to(logits.dtype)], dim=1)
        return BIAS_RANGE * torch.sigmoid(logits)

    def ids(self, grid: Grid, num_prefix_tokens: int, device=None) -> torch.Tensor:
        """:func:`offset_ids`, cached per grid, prefix count and device."""
        device = torch.device(device) if device is not None else next(self.mlp.parameters()).device
        key = (tuple(grid), num_prefix_tokens, device)
        return _IDS.get(key, lambda: offset_ids(grid, num_prefix_tokens, device))

    def bucket_bias_terms(self, grid: Grid, num_prefix_tokens: int, device=None) -> RelativeTerms:
        table = self.bias_table(grid, num_prefix_tokens)
        return RelativeTerms(
            ids=self.ids(grid, num_prefix_tokens, device), num_buckets=table.shape[1], bias_table=table
        )

    def position_bias(self, grid: Grid, num_prefix_tokens: int) -> torch.Tensor:  # heads, N, N
        # a gather rather than the terms' lookup: the table's width follows the grid, which may be symbolic
        ids = self.ids(grid, num_prefix_tokens)
        return self.bias_table(grid, num_prefix_tokens)[:, ids]

    def reads_extent(self) -> bool:
        return self.pretrained is None

    def padded_terms(
        self, grid: Grid, num_prefix_tokens: int, padding: Padding, device: torch.device | str | None = None
    ) -> tuple[RelativeTerms | None, torch.Tensor | None]:
        """With ``pretrained`` the bias reads offsets only (the padded grid's terms); without it the offsets
        are normalised by each image's own grid: a bias per image (B, heads, N, N)."""
        if self.pretrained is not None:
            return super().padded_terms(grid, num_prefix_tokens, padding, device)
        return None, padding.place_pairs(lambda size: self.position_bias(size, num_prefix_tokens), num_prefix_tokens)
