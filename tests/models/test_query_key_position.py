"""A position on queries and keys only (DETR's join) in every attention: global, windowed, spatially reduced."""

from __future__ import annotations

import torch

from vitpos.models.layers import Attention
from vitpos.models.pvt import SpatialReductionAttention
from vitpos.models.windows import WindowAttention


def _random(shape: tuple[int, ...]) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.float64)


def test_one_window_over_the_whole_grid_equals_global_attention() -> None:
    torch.manual_seed(0)
    grid, dim = (4, 4), 16
    windowed = WindowAttention(dim, 2, 4, shifted=False).double().eval()
    plain = Attention(dim, 2).double().eval()
    plain.load_state_dict(windowed.state_dict(), strict=False)
    x, pos = _random((2, 16, dim)), _random((1, 16, dim))
    torch.testing.assert_close(windowed(x, grid, 0, qk_pos=pos), plain(x, grid, 0, qk_pos=pos))
    assert not torch.allclose(windowed(x, grid, 0, qk_pos=pos), windowed(x, grid, 0))


def test_shifted_windows_cut_the_position_like_the_tokens() -> None:
    """Equal to a literal shifted-window computation with q, k from tokens + position and v from tokens."""
    torch.manual_seed(1)
    attn = WindowAttention(8, 2, 2, shifted=True).double().eval()
    x = _random((2, 6 * 4, 8))
    pos = _random((1, 24, 8))
    out = attn(x, (6, 4), 0, qk_pos=pos)
    # literal: per image, roll, cut into windows, attend with q, k from x + pos and v from x, undo
    w_q, w_k, w_v = attn.qkv.weight.chunk(3)
    b_q, b_k, b_v = attn.qkv.bias.chunk(3)
    expected = []
    for image in range(2):
        tokens = (x[image] + pos[0]).reshape(6, 4, 8).roll((-1, -1), (0, 1))
        values = x[image].reshape(6, 4, 8).roll((-1, -1), (0, 1))
        region = torch.zeros(6, 4, dtype=torch.long)  # Swin's regions, labelled on the rolled grid
        region[-2:-1] += 1
        region[-1:] += 2
        region[:, -2:-1] += 3
        region[:, -1:] += 6
        result = torch.zeros(6, 4, 8, dtype=torch.float64)
        for r in range(0, 6, 2):
            for c in range(0, 4, 2):
                t = tokens[r : r + 2, c : c + 2].reshape(4, 8)
                v = (values[r : r + 2, c : c + 2].reshape(4, 8) @ w_v.T + b_v).reshape(4, 2, 4).transpose(0, 1)
                q = (t @ w_q.T + b_q).reshape(4, 2, 4).transpose(0, 1)
                k = (t @ w_k.T + b_k).reshape(4, 2, 4).transpose(0, 1)
                scores = q @ k.transpose(-1, -2) / 2.0
                ids = region[r : r + 2, c : c + 2].reshape(4)
                scores = scores.masked_fill(ids[:, None] != ids[None, :], float("-inf"))
                heads = (scores.softmax(-1) @ v).transpose(0, 1).reshape(4, 8)
                result[r : r + 2, c : c + 2] = (heads @ attn.proj.weight.T + attn.proj.bias).reshape(2, 2, 8)
        expected.append(result.roll((1, 1), (0, 1)).reshape(24, 8))
    torch.testing.assert_close(out, torch.stack(expected))


def test_spatial_reduction_reduces_the_keys_with_their_position_and_the_values_without() -> None:
    torch.manual_seed(2)
    attn = SpatialReductionAttention(8, 2, 2).double().eval()
    x, pos = _random((2, 16, 8)), _random((1, 16, 8))
    w_q, w_k, w_v = attn.qkv.weight.chunk(3)
    b_q, b_k, b_v = attn.qkv.bias.chunk(3)

    def heads(t: torch.Tensor) -> torch.Tensor:
        return t.reshape(2, -1, 2, 4).transpose(1, 2)

    q = heads((x + pos) @ w_q.T + b_q)
    k = heads(attn.key_value_source(x + pos, (4, 4), 0) @ w_k.T + b_k)
    v = heads(attn.key_value_source(x, (4, 4), 0) @ w_v.T + b_v)
    out = ((q @ k.transpose(-1, -2) / 2.0).softmax(-1) @ v).transpose(1, 2).reshape(2, 16, 8)
    expected = out @ attn.proj.weight.T + attn.proj.bias
    torch.testing.assert_close(attn(x, (4, 4), 0, qk_pos=pos), expected)
