"""Swin-style windows: layouts, partition/merge, the shifted-window mask against a direct
construction, and window attention against dense masked attention."""

import itertools

import pytest
import torch
from torch import nn

from vitpos.attention import PATHS
from vitpos.encodings.relative.base import RelativeBias
from vitpos.grid import grid_offsets
from vitpos.models.windows import WindowAttention, WindowLayout, merge_windows, partition_windows, window_mask

GRIDS = [(14, 14), (7, 7), (8, 8), (9, 20), (16, 5), (3, 11), (21, 14)]


class OffsetBias(RelativeBias):
    """A learned scalar per head and 2-D offset, offsets clipped to the window (test double)."""

    def __init__(self, heads: int, window: int) -> None:
        super().__init__()
        self.window = window
        self.table = nn.Parameter(torch.randn(heads, (2 * window - 1) ** 2))

    def position_bias(self, grid, num_prefix_tokens):
        m = self.window
        off = grid_offsets(grid).clamp(-(m - 1), m - 1) + (m - 1)
        return self.table[:, off[..., 0] * (2 * m - 1) + off[..., 1]]


def direct_groups(side: int, padded: int, window: int, shift: int) -> torch.Tensor:
    """Which window a row falls in when windows start at -shift (the picture of Swin's Fig. 2)."""
    rows = torch.arange(padded)
    return (rows + window - shift) // window if shift else rows // window


def direct_allowed(layout: WindowLayout) -> torch.Tensor:
    """(Hp*Wp, Hp*Wp): query i may attend key j iff they share a shifted window and j is real or i is padding."""
    (h, w), (hp, wp), (wh, ww), (sh, sw) = layout.grid, layout.padded, layout.window, layout.shift
    gy = direct_groups(h, hp, wh, sh)[:, None].expand(hp, wp).reshape(-1)
    gx = direct_groups(w, wp, ww, sw)[None, :].expand(hp, wp).reshape(-1)
    ys, xs = torch.meshgrid(torch.arange(hp), torch.arange(wp), indexing="ij")
    pad = ((ys >= h) | (xs >= w)).reshape(-1)
    same = (gy[:, None] == gy[None, :]) & (gx[:, None] == gx[None, :])
    return same & (~pad[None, :] | pad[:, None])


def model_allowed(layout: WindowLayout) -> torch.Tensor:
    """The same matrix read off the windows and the mask the module uses."""
    hp, wp = layout.padded
    # the padded grid with the same windows and shift: partition without padding gives positions
    positions = partition_windows(
        torch.arange(hp * wp).reshape(1, -1, 1), WindowLayout(layout.padded, layout.window, layout.shift)
    )[..., 0]
    mask = window_mask(layout)
    allowed = torch.zeros(hp * wp, hp * wp, dtype=torch.bool)
    for n, pos in enumerate(positions):
        ok = torch.ones(len(pos), len(pos), dtype=torch.bool) if mask is None else mask[n] == 0
        allowed[pos[:, None], pos[None, :]] = ok
    assert sorted(positions.reshape(-1).tolist()) == list(range(hp * wp))  # every cell in one window
    return allowed


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("shifted", [False, True])
def test_shifted_window_mask_matches_direct_construction(grid, shifted):
    layout = WindowLayout.plan(grid, 7, shifted)
    assert torch.equal(model_allowed(layout), direct_allowed(layout))


def test_mask_values_and_absence():
    layout = WindowLayout.plan((14, 14), 7, True)
    mask = window_mask(layout)
    assert mask.shape == (4, 49, 49)
    assert set(mask.unique().tolist()) == {0.0, float("-inf")}
    assert (mask[0] == 0).all()  # the top-left window holds one region only
    assert window_mask(WindowLayout.plan((14, 14), 7, False)) is None
    assert window_mask(WindowLayout.plan((7, 7), 7, True)) is None  # fits in one window: no shift


@pytest.mark.parametrize(
    "grid,shifted,window,shift,padded",
    [
        ((56, 56), True, (7, 7), (3, 3), (56, 56)),
        ((7, 7), True, (7, 7), (0, 0), (7, 7)),  # Swin-T's last stage at 224: no shift
        ((4, 20), True, (4, 7), (0, 3), (4, 21)),  # per axis: a short axis is one window
        ((8, 8), False, (7, 7), (0, 0), (14, 14)),
    ],
)
def test_layout_plan(grid, shifted, window, shift, padded):
    layout = WindowLayout.plan(grid, 7, shifted)
    assert (layout.window, layout.shift, layout.padded) == (window, shift, padded)


@pytest.mark.parametrize("grid", GRIDS)
@pytest.mark.parametrize("shifted", [False, True])
def test_merge_inverts_partition(grid, shifted):
    layout = WindowLayout.plan(grid, 7, shifted)
    x = torch.randn(2, grid[0] * grid[1], 3)
    windows = partition_windows(x, layout)
    assert windows.shape == (2 * layout.num_windows, layout.window[0] * layout.window[1], 3)
    assert torch.equal(merge_windows(windows, layout), x)


def test_unshifted_windows_are_the_grid_blocks():
    x = torch.arange(16 * 2, dtype=torch.float32).reshape(2, 16, 1)
    windows = partition_windows(x, WindowLayout.plan((4, 4), 2, False))[..., 0]
    assert windows[0].tolist() == [0, 1, 4, 5] and windows[1].tolist() == [2, 3, 6, 7]
    assert windows[4].tolist() == [16, 17, 20, 21]  # second image


def dense_reference(attn: WindowAttention, x: torch.Tensor, grid) -> torch.Tensor:
    """Attention over the whole grid with the direct mask and the relative bias of global offsets."""
    b, n, c = x.shape
    layout = attn.layout(grid)
    h, w = grid
    _hp, wp = layout.padded
    real = torch.tensor([y * wp + xx for y in range(h) for xx in range(w)])
    allowed = direct_allowed(layout)[real[:, None], real[None, :]]
    q, k, v = attn.qkv(x).reshape(b, n, 3, attn.num_heads, attn.head_dim).permute(2, 0, 3, 1, 4)
    logits = q @ k.transpose(-2, -1) * attn.scale + attn.relative.position_bias(grid, 0)
    logits = logits.masked_fill(~allowed, float("-inf"))
    out = (logits.softmax(-1) @ v).transpose(1, 2).reshape(b, n, c)
    return attn.proj(out)


@pytest.mark.parametrize("grid", [(14, 14), (9, 20), (3, 11), (16, 5)])
@pytest.mark.parametrize("shifted", [False, True])
@pytest.mark.parametrize("path", PATHS)
def test_window_attention_equals_dense_masked_attention(grid, shifted, path):
    attn = WindowAttention(16, 2, 7, shifted, relative=OffsetBias(2, 7)).eval()
    attn.path = path
    x = torch.randn(3, grid[0] * grid[1], 16)
    with torch.no_grad():  # FlexAttention runs forward only on CPU
        assert torch.allclose(attn(x, grid, 0), dense_reference(attn, x, grid), atol=1e-5)


def test_window_attention_rejects_prefix_tokens():
    attn = WindowAttention(16, 2, 7, False)
    with pytest.raises(ValueError, match="no place for prefix tokens"):
        attn(torch.randn(1, 50, 16), (7, 7), 1)


def test_tokens_outside_a_window_change_nothing():
    """A token's output depends only on its shifted window, padding included."""
    attn = WindowAttention(8, 2, 7, True, relative=OffsetBias(2, 7)).eval()
    grid = (9, 9)  # padded to 14x14; windows shifted by 3 group rows 0-2 | 3-8 (+ padding) alike columns
    x = torch.randn(1, 81, 8)
    y = x.clone().reshape(1, 9, 9, 8)
    y[:, 3:, :] = torch.randn(1, 6, 9, 8)  # rows of the other group
    out_x, out_y = attn(x, grid, 0).reshape(9, 9, 8), attn(y.reshape(1, 81, 8), grid, 0).reshape(9, 9, 8)
    assert torch.allclose(out_x[:3], out_y[:3], atol=1e-6)
    assert not torch.allclose(out_x[3:], out_y[3:])


def test_window_attention_gradients_and_mask_cache():
    attn = WindowAttention(8, 2, 7, True, relative=OffsetBias(2, 7))
    x = torch.randn(2, 100, 8, requires_grad=True)
    attn(x, (10, 10), 0).sum().backward()
    assert x.grad.abs().sum() > 0 and attn.relative.table.grad.abs().sum() > 0
    masks = [attn._masks.get((attn.layout((10, 10)), x.device), lambda: None) for _ in range(2)]
    assert masks[0] is masks[1] and masks[0] is not None


@pytest.mark.parametrize("window,grid", list(itertools.product([2, 3], [(4, 6), (5, 3)])))
def test_small_windows(window, grid):
    layout = WindowLayout.plan(grid, window, True)
    assert torch.equal(model_allowed(layout), direct_allowed(layout))
