"""Swin-style window attention (Liu et al., ICCV 2021): windows, cyclic shifts, padding, masks.

A block cuts the (H, W) token grid into non-overlapping windows of M x M tokens and attends
within each. Every second block shifts the windows by M // 2 (Swin's "shifted windows"); as in
Swin this is done by rolling the grid by (-M/2, -M/2), partitioning, and masking the pairs in
a window that came from different regions of the unrolled grid.

Two rules extend Swin's to any grid:

* an axis that fits in one window (side <= M) becomes one window along that axis, unshifted
  (Swin applies this to both axes when the smaller side fits; per axis it also covers
  non-square grids);
* other axes are padded at the end to a multiple of M. Padded tokens are masked as keys, so
  padding changes no output (Swin's detection code attends to zero-padded tokens instead).
  A padded query may attend to its window's tokens, so that no row of logits is empty.

Relative encodings see the window grid ``(wh, ww)`` with no prefix tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..encodings.cache import GridCache
from ..encodings.relative.base import RelativePosition
from ..grid import Grid
from .layers import Attention

__all__ = ["WindowLayout", "partition_windows", "merge_windows", "window_mask", "WindowAttention"]


@dataclass(frozen=True)
class WindowLayout:
    """How one block cuts a grid: window size, cyclic shift and end padding, per axis."""

    grid: Grid
    """The real token grid (H, W)."""
    window: Grid
    """Window size (wh, ww) in tokens."""
    shift: Grid
    """Cyclic shift (sh, sw); the grid is rolled by (-sh, -sw) before partitioning."""

    @classmethod
    def plan(cls, grid: Grid, window_size: int, shifted: bool) -> "WindowLayout":
        """Windows of ``window_size`` (shifted by half of it when ``shifted``); axes that fit in
        one window become a single unshifted window."""
        window = tuple(min(window_size, side) for side in grid)
        shift = tuple(window_size // 2 if shifted and side > window_size else 0 for side in grid)
        return cls(tuple(grid), window, shift)

    @property
    def padded(self) -> Grid:
        """The grid after padding each axis to a multiple of its window size."""
        return tuple(-(-side // size) * size for side, size in zip(self.grid, self.window))

    @property
    def num_windows(self) -> int:
        """Windows per image."""
        (hp, wp), (wh, ww) = self.padded, self.window
        return (hp // wh) * (wp // ww)

    @property
    def needs_mask(self) -> bool:
        """True if some window mixes regions (a shift) or holds padding."""
        return any(self.shift) or self.padded != self.grid


def partition_windows(x: torch.Tensor, layout: WindowLayout) -> torch.Tensor:
    """(B, H*W, C) tokens -> (B * windows, wh*ww, C): pad, roll by -shift, cut into windows."""
    b, n, c = x.shape
    (h, w), (hp, wp) = layout.grid, layout.padded
    if n != h * w:
        raise ValueError(f"{n} tokens do not fill a {h}x{w} grid")
    x = x.reshape(b, h, w, c)
    if (hp, wp) != (h, w):
        x = F.pad(x, (0, 0, 0, wp - w, 0, hp - h))
    if any(layout.shift):
        x = torch.roll(x, shifts=(-layout.shift[0], -layout.shift[1]), dims=(1, 2))
    return _cut(x, layout)


def _cut(x: torch.Tensor, layout: WindowLayout) -> torch.Tensor:
    """(B, Hp, Wp, C) padded, rolled map -> (B * windows, wh*ww, C), windows in row-major order."""
    b, hp, wp, c = x.shape
    wh, ww = layout.window
    x = x.reshape(b, hp // wh, wh, wp // ww, ww, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(b * layout.num_windows, wh * ww, c)


def merge_windows(windows: torch.Tensor, layout: WindowLayout) -> torch.Tensor:
    """Inverse of :func:`partition_windows`: (B * windows, wh*ww, C) -> (B, H*W, C)."""
    (h, w), (hp, wp), (wh, ww) = layout.grid, layout.padded, layout.window
    c = windows.shape[-1]
    b = windows.shape[0] // layout.num_windows
    x = windows.reshape(b, hp // wh, wp // ww, wh, ww, c).permute(0, 1, 3, 2, 4, 5).reshape(b, hp, wp, c)
    if any(layout.shift):
        x = torch.roll(x, shifts=layout.shift, dims=(1, 2))
    return x[:, :h, :w].reshape(b, h * w, c)


def _region_labels(padded: int, window: int, shift: int) -> torch.Tensor:
    """Swin's region id per row of the rolled axis: the last window holds up to two regions
    that were apart before the roll."""
    labels = torch.zeros(padded, dtype=torch.long)
    if shift:
        labels[padded - window : padded - shift] = 1
        labels[padded - shift :] = 2
    return labels


def window_mask(layout: WindowLayout, device=None) -> torch.Tensor | None:
    """Additive mask (windows, N, N), N = wh*ww: 0 where a query may attend to a key, -inf
    where the two came from different regions or the key is padding (and the query is not);
    ``None`` when no window needs one."""
    if not layout.needs_mask:
        return None
    (h, w), (hp, wp), (wh, ww), (sh, sw) = layout.grid, layout.padded, layout.window, layout.shift
    rows, cols = _region_labels(hp, wh, sh), _region_labels(wp, ww, sw)
    region = (rows[:, None] * 3 + cols[None, :]).to(device)
    padding = torch.zeros(hp, wp, dtype=torch.bool, device=device)
    padding[h:, :] = True
    padding[:, w:] = True
    padding = torch.roll(padding, shifts=(-sh, -sw), dims=(0, 1))
    region_w, padding_w = _cut(torch.stack([region, padding.long()], dim=-1)[None], layout).unbind(-1)  # windows, N
    padding_w = padding_w.bool()
    blocked = (region_w[:, :, None] != region_w[:, None, :]) | (padding_w[:, None, :] & ~padding_w[:, :, None])
    return torch.zeros(blocked.shape, device=device).masked_fill(blocked, float("-inf"))


class WindowAttention(Attention):
    """Multi-head attention within (shifted) windows; the relative term sees the window grid.

    ``forward(x, grid, 0)`` takes the whole (B, H*W, C) token sequence of a stage; models with
    prefix tokens cannot use it.
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        window_size: int,
        shifted: bool,
        qkv_bias: bool = True,
        attn_drop: float = 0.0,
        proj_drop: float = 0.0,
        relative: RelativePosition | None = None,
    ) -> None:
        super().__init__(dim, num_heads, qkv_bias, attn_drop, proj_drop, relative)
        self.window_size = window_size
        self.shifted = shifted
        self._masks = GridCache()

    def layout(self, grid: Grid) -> WindowLayout:
        """This block's windows on ``grid``."""
        return WindowLayout.plan(grid, self.window_size, self.shifted)

    def forward(
        self,
        x: torch.Tensor,
        grid: Grid,
        num_prefix_tokens: int,
        mask: torch.Tensor | None = None,
        return_weights: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Attention within windows; the weights, if asked, are per window: (B * windows, heads, N, N)."""
        if num_prefix_tokens:
            raise ValueError(f"window attention has no place for prefix tokens, got num_prefix_tokens={num_prefix_tokens}")
        if mask is not None:
            raise ValueError("window attention builds its own mask; pass none")
        layout = self.layout(grid)
        windows = partition_windows(x, layout)
        mask = self._masks.get((layout, x.device), lambda: window_mask(layout, x.device))
        if mask is not None:
            # one copy of each image's masks per window batch entry: B * windows, 1, N, N
            mask = mask.repeat(x.shape[0], 1, 1).unsqueeze(1)
        result = super().forward(windows, layout.window, 0, mask, return_weights)
        if return_weights:
            return merge_windows(result[0], layout), result[1]
        return merge_windows(result, layout)

    def extra_repr(self) -> str:
        return f"window_size={self.window_size}, shifted={self.shifted}"
