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

While tracing (``torch.export``, ``torch.compile``) the grid sizes are symbolic, and a graph
must hold for every size, so the first rule is realised without branching on a side: windows
are always M x M, an axis shorter than M is padded to one whole window whose padded keys are
masked, and the shift is a tensor, ``M // 2`` where the side exceeds M and 0 elsewhere; every
block gathers its windows (padding, roll and cut in one index) and masks, where eager execution
may skip a step. For real tokens this is the same attention as the eager rule: the
same keys, and relative terms that depend only on the offset (or, for RoPE, the position from
the window's first row and column). The exception is a relative bias normalised over its keys
(LaPE's join with a bias, :class:`~vitpos.encodings.lape.NormalisedBias`), whose statistics
would include the padded keys: exports of it need every stage's grid to be at least M x M.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..encodings.relative.base import RelativePosition
from ..grid import Grid, GridCache, tracing
from ..padding import Padding
from .layers import Attention, Partition

__all__ = ["WindowLayout", "partition_windows", "merge_windows", "window_mask", "WindowAttention"]


@dataclass(frozen=True)
class WindowLayout:
    """How one block cuts a grid: window size, cyclic shift and end padding, per axis."""

    grid: Grid
    """The real token grid (H, W)."""
    window: Grid
    """Window size (wh, ww) in tokens."""
    shift: tuple
    """Cyclic shift (sh, sw); the grid is rolled by (-sh, -sw) before partitioning (0-d tensors
    while tracing)."""

    @classmethod
    def plan(cls, grid: Grid, window_size: int, shifted: bool) -> WindowLayout:
        """Windows of ``window_size`` (shifted by half of it when ``shifted``); axes that fit in
        one window become a single unshifted window (while tracing: a padded whole window, see
        the module docstring)."""
        h, w = grid
        if tracing():
            size = (window_size, window_size)
            return cls(
                (h, w), size, (_traced_shift(h, window_size), _traced_shift(w, window_size)) if shifted else (0, 0)
            )
        window = (min(window_size, h), min(window_size, w))
        half = window_size // 2 if shifted else 0
        return cls((h, w), window, (half if h > window_size else 0, half if w > window_size else 0))

    @property
    def padded(self) -> Grid:
        """The grid after padding each axis to a multiple of its window size."""
        (h, w), (wh, ww) = self.grid, self.window
        return (h + wh - 1) // wh * wh, (w + ww - 1) // ww * ww

    @property
    def num_windows(self) -> int:
        """Windows per image."""
        (hp, wp), (wh, ww) = self.padded, self.window
        return (hp // wh) * (wp // ww)

    @property
    def needs_mask(self) -> bool:
        """True if some window mixes regions (a shift) or holds padding; always while tracing."""
        return tracing() or any(self.shift) or self.padded != self.grid


def _traced_shift(side: int, window_size: int) -> torch.Tensor:
    """Swin's shift of an axis with a symbolic ``side`` as a 0-d tensor: M // 2 if side > M, else 0
    (a tensor, so no shape depends on it and the graph does not branch on the side)."""
    return (torch.full((), side, dtype=torch.long) > window_size).long() * (window_size // 2)


def _slot_sources(layout: WindowLayout, device=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The gathers of the traced path: for every slot of every window (windows, then slots, row-major)
    its row and column on the rolled, padded grid and the token it holds (H*W: padding).

    Gathers instead of pad / roll / reshape: views of symbolically sized tensors make the tracer
    guard on their contiguity, which holds at some sizes and not at others.
    """
    (h, w), (hp, wp), (m, _), (sh, sw) = layout.grid, layout.padded, layout.window, layout.shift
    slots = torch.arange(layout.num_windows * m * m, device=device)
    window, position = slots // (m * m), slots % (m * m)
    row = window // (wp // m) * m + position // m
    col = _mod(window, wp // m) * m + position % m
    y, x = _mod(row + sh, hp), _mod(col + sw, wp)  # where the roll by (-sh, -sw) took them from
    return row, col, torch.where((y < h) & (x < w), y * w + x, h * w)


def _mod(x: torch.Tensor, n: int) -> torch.Tensor:
    """``x % n`` (floored) for a symbolic ``n``, from a division: ONNX's exporter has no remainder
    by a symbolic scalar."""
    return x - x // n * n


def partition_windows(x: torch.Tensor, layout: WindowLayout) -> torch.Tensor:
    """(B, H*W, C) tokens -> (B * windows, wh*ww, C): pad, roll by -shift, cut into windows."""
    b, n, c = x.shape
    (h, w), (hp, wp) = layout.grid, layout.padded
    if n != h * w:
        raise ValueError(f"{n} tokens do not fill a {h}x{w} grid")
    wh, ww = layout.window
    if tracing():
        token = _slot_sources(layout, x.device)[2]
        return F.pad(x, (0, 0, 0, 1)).index_select(1, token).reshape(b * layout.num_windows, wh * ww, c)
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
    (h, w), (hp, wp), (wh, ww), (sh, sw) = layout.grid, layout.padded, layout.window, layout.shift
    c = windows.shape[-1]
    b = windows.shape[0] // layout.num_windows
    if tracing():
        tokens = torch.arange(h * w, device=windows.device)
        row, col = _mod(tokens // w - sh, hp), _mod(_mod(tokens, w) - sw, wp)
        slot = (row // wh * (wp // ww) + col // ww) * (wh * ww) + row % wh * ww + col % ww
        return windows.reshape(b, -1, c).index_select(1, slot)
    x = windows.reshape(b, hp // wh, wp // ww, wh, ww, c).permute(0, 1, 3, 2, 4, 5).reshape(b, hp, wp, c)
    if any(layout.shift):
        x = torch.roll(x, shifts=layout.shift, dims=(1, 2))
    return x[:, :h, :w].reshape(b, h * w, c)


def _region_labels(rows: torch.Tensor, padded: int, window: int, shift: int) -> torch.Tensor:
    """Swin's region id of ``rows`` of the rolled axis: the last window holds up to two regions
    that were apart before the roll (rows of the last window 1, its last ``shift`` rows 2)."""
    return (rows >= padded - window).long() + (rows >= padded - shift).long()


def window_mask(layout: WindowLayout, device=None, region_value: float = float("-inf")) -> torch.Tensor | None:
    """Additive mask (windows, N, N), N = wh*ww: 0 where a query may attend to a key, ``region_value``
    where the two came from different regions, -inf where the key is padding (and the query is not);
    ``None`` when no window needs one."""
    if not layout.needs_mask:
        return None
    (h, w), (hp, wp), (wh, ww), (sh, sw) = layout.grid, layout.padded, layout.window, layout.shift
    if tracing():
        row, col, token = _slot_sources(layout, device)
        region_w = (_region_labels(row, hp, wh, sh) * 3 + _region_labels(col, wp, ww, sw)).reshape(-1, wh * ww)
        padding_w = (token == h * w).reshape(-1, wh * ww)
    else:
        rows = _region_labels(torch.arange(hp, device=device), hp, wh, sh)
        cols = _region_labels(torch.arange(wp, device=device), wp, ww, sw)
        padding = torch.zeros(hp, wp, dtype=torch.bool, device=device)
        padding[h:, :] = True
        padding[:, w:] = True
        padding = torch.roll(padding, shifts=(-sh, -sw), dims=(0, 1))
        region = rows[:, None] * 3 + cols[None, :]
        region_w, padding_w = _cut(torch.stack([region, padding.long()], dim=-1)[None], layout).unbind(-1)  # windows, N
        padding_w = padding_w.bool()
    apart = region_w[:, :, None] != region_w[:, None, :]
    padded = padding_w[:, None, :] & ~padding_w[:, :, None]
    mask = torch.zeros(apart.shape, device=device).masked_fill(apart, region_value)
    return mask.masked_fill(padded, float("-inf"))


def _padding_mask(padding: Padding, layout: WindowLayout) -> torch.Tensor:
    """Additive mask (B * windows, 1, N, N): -inf where the key is a padded cell of a padded batch and
    the query is not (a padded query keeps its keys, so that no row of logits is empty)."""
    cells = partition_windows(padding.tokens()[..., None].float(), layout)[..., 0] > 0.5  # B * windows, N
    blocked = cells[:, None, :] & ~cells[:, :, None]
    return torch.zeros(blocked.shape, device=blocked.device).masked_fill(blocked, float("-inf")).unsqueeze(1)


class WindowAttention(Attention):
    """Multi-head attention within (shifted) windows; the relative term sees the window grid.

    ``forward(x, grid, 0)`` takes the whole (B, H*W, C) token sequence of a stage; models with
    prefix tokens cannot use it. ``region_mask``: the logit added where a shifted window joins
    tokens from different regions: -inf, or Swin V2's released -100 (with cosine attention's logits
    of up to 100 + 16, -100 leaves such pairs a weight, and the release's forward has it).
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
        cosine: bool = False,
        region_mask: float = float("-inf"),
    ) -> None:
        super().__init__(dim, num_heads, qkv_bias, attn_drop, proj_drop, relative, cosine)
        self.window_size = window_size
        self.shifted = shifted
        self.region_mask = region_mask
        self._masks: GridCache[torch.Tensor | None] = (
            GridCache()
        )  # per layout: rebuilding them costs 2-4% of a Swin-T forward (bench.attention.caches)

    def layout(self, grid: Grid) -> WindowLayout:
        """This block's windows on ``grid``."""
        return WindowLayout.plan(grid, self.window_size, self.shifted)

    def partition(
        self,
        x: torch.Tensor,
        grid: Grid,
        num_prefix_tokens: int,
        mask: torch.Tensor | None,
        qk_pos: torch.Tensor | None,
        padding: Padding | None = None,
    ) -> Partition:
        """The windows of ``grid`` as a batch (B * windows, N, C) with their mask; the weights, if
        asked, are per window: (B * windows, heads, N, N). ``qk_pos`` (1 or B, H*W, C) is cut into
        the same windows as the tokens. With ``padding`` (a padded batch) the mask also hides each
        image's padded cells from its other cells, combined with the shift and layout masks."""
        if num_prefix_tokens:
            raise ValueError(
                f"window attention has no place for prefix tokens, got num_prefix_tokens={num_prefix_tokens}"
            )
        if mask is not None:
            raise ValueError("window attention builds its own mask; pass none")
        layout = self.layout(grid)
        mask = self._masks.get((layout, x.device), lambda: window_mask(layout, x.device, self.region_mask))
        if mask is not None:
            # one copy of each image's masks per window batch entry: B * windows, 1, N, N
            mask = mask.repeat(x.shape[0], 1, 1).unsqueeze(1)
        if padding is not None:
            hidden = _padding_mask(padding, layout).to(x.dtype)
            mask = hidden if mask is None else mask + hidden
        if qk_pos is not None:
            qk_pos = partition_windows(qk_pos.expand(x.shape[0], -1, -1), layout)
        return Partition(partition_windows(x, layout), layout.window, 0, mask, qk_pos, layout)

    def merge(self, out: torch.Tensor, part: Partition) -> torch.Tensor:
        return merge_windows(out, part.layout)

    def extra_repr(self) -> str:
        return f"window_size={self.window_size}, shifted={self.shifted}"
