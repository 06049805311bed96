"""Attention maps read through hooks on every stage, query maps and attention distance."""

import math

import pytest
import torch

from vitpos.analysis.attention import (
    attention_maps,
    explicit_attention,
    mean_attention_distance,
    patch_attention,
    query_maps,
    uniform_attention_distance,
)
from vitpos.analysis.attention_summary import attention_summaries, pooled_matrix
from vitpos.models.layers import Attention

from .families import tiny_model, tiny_pyramid


def _attention_input(attn: Attention, model, images) -> torch.Tensor:
    """The tokens ``attn`` sees in a forward of ``images`` (its first positional argument)."""
    seen = []
    handle = attn.register_forward_pre_hook(lambda _m, args: seen.append(args[0]))
    model(images)
    handle.remove()
    return seen[0]


def _softmax_by_hand(attn: Attention, h: torch.Tensor) -> torch.Tensor:
    b, n, _ = h.shape
    qkv = attn.qkv(h).reshape(b, n, 3, attn.num_heads, attn.head_dim).permute(2, 0, 3, 1, 4)
    return ((qkv[0] * attn.scale) @ qkv[1].transpose(-2, -1)).softmax(-1)


@pytest.mark.parametrize("head", ["cls", "gap"])
def test_weights_equal_a_manual_softmax_and_the_model_is_restored(head):
    model = tiny_model({"absolute": "learned"}, head=head)
    x = torch.randn(3, 3, 32, 40)  # grid 4x5
    maps = attention_maps(model, x)
    n = model.num_prefix_tokens + 20
    assert [(m.stage, m.block) for m in maps] == [(0, 0), (0, 1)]
    assert maps[0].weights.shape == (3, 2, n, n) and maps[0].grid == (4, 5) and maps[0].key_grid == (4, 5)
    assert torch.allclose(maps[1].weights.sum(-1), torch.ones(3, 2, n), atol=1e-5)
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules() if isinstance(m, Attention))
    assert model(x).shape == (3, 5)  # plain outputs again
    attn = model.stages[0].blocks[0].attn
    with torch.no_grad():
        expected = _softmax_by_hand(attn, _attention_input(attn, model, x))
    assert torch.allclose(maps[0].weights, expected, atol=1e-5)


def test_pvt_maps_every_stage_and_its_reduced_keys():
    model = tiny_pyramid("pvt")  # grids 16, 8, 4, 2; keys reduced by 4, 2, 1, 1
    x = torch.randn(2, 3, 32, 32)
    maps = attention_maps(model, x)
    assert [(m.stage, m.block) for m in maps] == [(0, 0), (1, 0), (2, 0), (3, 0)]
    assert [m.grid for m in maps] == [(16, 16), (8, 8), (4, 4), (2, 2)]
    assert [m.key_grid for m in maps] == [(4, 4), (4, 4), (4, 4), (2, 2)]
    assert [tuple(m.weights.shape) for m in maps] == [(2, 1, 256, 16), (2, 2, 64, 16), (2, 3, 16, 16), (2, 4, 4, 4)]
    for m in maps:
        assert torch.allclose(m.weights.sum(-1), torch.ones(()), atol=1e-5)
    where = query_maps(maps[0].weights[0], (16, 16), [(5, 9)], 0, key_stride=4)
    assert where.shape == (1, 1, 4, 4) and torch.equal(where[0, 0].flatten(), maps[0].weights[0, 0, 5 * 16 + 9])


def test_swin_window_weights_land_on_their_tokens():
    model = tiny_pyramid("swin", depths=(2, 1, 1, 1))  # stage 0: 16x16 in 4x4 windows, block 1 shifted by 2
    x = torch.randn(2, 3, 32, 32)
    with explicit_attention(model) as raw:
        model(x)
    maps = attention_maps(model, x)
    assert [(m.stage, m.block) for m in maps] == [(0, 0), (0, 1), (1, 0), (2, 0), (3, 0)]
    assert raw[0].shape == (2 * 16, 1, 16, 16)  # as the layer returns them: per window
    dense = maps[0].weights
    assert dense.shape == (2, 1, 256, 256) and torch.allclose(dense.sum(-1), torch.ones(()), atol=1e-5)
    # unshifted: window (1, 2) holds rows 4..7, columns 8..11; its first slot is cell (4, 8)
    cells = torch.tensor([r * 16 + c for r in range(4, 8) for c in range(8, 12)])
    assert torch.equal(dense[1, 0][cells][:, cells], raw[0][16 + 1 * 4 + 2, 0])
    assert dense[:, :, cells[0]].sum(-1).allclose(dense[:, :, cells[0]][..., cells].sum(-1))  # nothing outside
    # shifted by 2: cell (1, 1) shares its window with cells (0..1, 0..1) and with the wrapped-around
    # corner, but the mask keeps it to the four cells of its own region
    row = maps[1].weights[0, 0, 1 * 16 + 1].reshape(16, 16)
    assert {tuple(cell) for cell in row.nonzero().tolist()} == {(0, 0), (0, 1), (1, 0), (1, 1)}


def test_uniform_attention_has_the_mean_cell_distance():
    grid = (3, 4)
    uniform = torch.full((2, 1, 13, 13), 1 / 13)  # one prefix token
    distance = mean_attention_distance(uniform, grid, 1)
    assert torch.allclose(distance, torch.tensor([uniform_attention_distance(grid)]), atol=1e-6)
    identity = torch.eye(12).expand(2, 3, 12, 12)
    assert torch.allclose(mean_attention_distance(identity, grid, 0), torch.zeros(3))


def test_reduced_keys_are_measured_from_their_centre():
    # a 2x2 grid reduced by 2: one key at the centre, half a diagonal from every cell
    weights = torch.ones(1, 1, 4, 1)
    assert mean_attention_distance(weights, (2, 2), 0, key_stride=2).item() == pytest.approx(math.sqrt(0.5))
    assert uniform_attention_distance((2, 2), key_stride=2) == pytest.approx(math.sqrt(0.5))
    # 5x4 reduced by 2 keeps 2x2 keys (the last row is cut off), centred at rows/cols 0.5 and 2.5
    onto_last = torch.zeros(1, 1, 20, 4)
    onto_last[..., 3] = 1.0
    distance = mean_attention_distance(onto_last, (5, 4), 0, key_stride=2).item()
    rows, cols = torch.meshgrid(torch.arange(5.0), torch.arange(4.0), indexing="ij")
    assert distance == pytest.approx(float(((rows - 2.5) ** 2 + (cols - 2.5) ** 2).sqrt().mean()), rel=1e-6)


def test_query_maps_and_patch_renormalisation():
    weights = torch.rand(2, 4, 1 + 6, 1 + 6).softmax(-1)
    patches = patch_attention(weights, 1)
    assert torch.allclose(patches.sum(-1), torch.ones(2, 4, 6))
    maps = query_maps(weights, (2, 3), [(1, 2), (0, 0)], 1)
    assert maps.shape == (2, 4, 2, 2, 3)
    assert torch.allclose(maps[:, :, 0].reshape(2, 4, 6), patches[:, :, 5])


def test_model_without_vitpos_attention_is_a_clear_error():
    with pytest.raises(ValueError, match="no vitpos Attention layers"), explicit_attention(torch.nn.Linear(2, 2)):
        pass


@pytest.mark.parametrize("arch", ["vit", "pvt", "swin"])
def test_streamed_summaries_equal_the_dense_maps(arch):
    model = (
        tiny_model({"absolute": "learned"}, head="cls") if arch == "vit" else tiny_pyramid(arch, depths=(2, 1, 1, 1))
    )
    x = torch.randn(5, 3, 32, 32)
    maps = attention_maps(model, x)
    stages = sorted({m.stage for m in maps})

    def queries(grid):
        return [(0, 0), (grid[0] // 2, grid[1] - 1)]

    summaries = attention_summaries(model, x, stages, queries, images_per_pass=2)  # passes of 2, 2 and 1 images
    assert [(s.stage, s.block) for s in summaries] == [(m.stage, m.block) for m in maps]
    for s, m in zip(summaries, maps, strict=True):
        assert s.grid == m.grid and s.key_stride == m.key_stride
        torch.testing.assert_close(
            s.distance, mean_attention_distance(m.weights, m.grid, m.num_prefix_tokens, m.key_stride)
        )
        want = query_maps(m.weights.mean(dim=(0, 1)), m.grid, queries(m.grid), m.num_prefix_tokens, m.key_stride)
        torch.testing.assert_close(s.queries, want.float(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(s.matrix, patch_attention(m.weights[0], m.num_prefix_tokens))


def test_a_large_matrix_is_pooled_to_a_figure_sized_mean():
    weights = torch.rand(2, 1000, 49)
    pooled = pooled_matrix(weights, side=100)
    assert pooled.shape == (2, 100, 49)
    torch.testing.assert_close(pooled[:, 0], weights[:, :10].mean(dim=1))
    assert pooled_matrix(weights, side=1000) is weights
