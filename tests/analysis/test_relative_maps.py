"""Relative bias maps around reference patches, through the RelativePosition interface."""

import pytest
import torch
from torch import nn

from vitpos.analysis.relative_maps import (
    bias_maps,
    bucket_maps,
    reference_lattice,
    relative_attention_layers,
    relative_logit_bias,
)
from vitpos.attention import RelativeTerms
from vitpos.encodings.relative.base import RelativeBias, RelativePosition
from vitpos.grid import grid_offsets

from .families import tiny_model, tiny_pyramid


class RowOffsetBias(RelativeBias):
    """A toy bias: head h adds (h + 1) * (row offset) between query and key; prefix pairs get 0."""

    def __init__(self, heads: int) -> None:
        super().__init__()
        self.heads = heads

    def position_bias(self, grid, num_prefix_tokens):
        dy = grid_offsets(grid)[..., 0].float()
        n = num_prefix_tokens + dy.shape[0]
        bias = torch.zeros(self.heads, n, n)
        bias[:, num_prefix_tokens:, num_prefix_tokens:] = torch.arange(1, self.heads + 1.0)[:, None, None] * dy
        return bias


class QueryDotBias(RelativePosition):
    """A toy content-dependent term: scale q_i . p, added to every key (one bucket for every pair)."""

    def __init__(self, head_dim: int) -> None:
        super().__init__()
        self.p = nn.Parameter(torch.randn(1, head_dim))

    def relative_terms(self, grid, num_prefix_tokens, device=None):
        n = num_prefix_tokens + grid[0] * grid[1]
        return RelativeTerms(ids=torch.zeros(n, n, dtype=torch.long), num_buckets=1, key_table=self.p)


def test_position_bias_needs_no_input_and_maps_around_references():
    model = tiny_model({"absolute": "none"})
    model.stages[0].blocks[1].attn.relative = RowOffsetBias(2)
    bias = relative_logit_bias(model, block=0)  # the first layer that has a relative encoding
    assert bias.shape == (2, 17, 17)
    maps = bias_maps(bias, (4, 4), [(0, 0), (3, 2)], 1)
    assert maps.shape == (2, 2, 4, 4)
    assert torch.equal(maps[1, 1, 0], torch.full((4,), 2 * 3.0))  # head 1, query row 3, key row 0: 2 * (3 - 0)
    assert torch.equal(maps[0, 0, 2], torch.full((4,), -2.0))


def test_content_dependent_bias_is_evaluated_on_the_captured_queries():
    model = tiny_model({"absolute": "learned"})
    attn = model.stages[0].blocks[0].attn
    attn.relative = QueryDotBias(16)
    images = torch.randn(3, 3, 32, 32)
    bias = relative_logit_bias(model, 0, images)
    seen = []
    handle = attn.register_forward_pre_hook(lambda _m, args: seen.append(args[0]))
    model(images)
    handle.remove()
    q = attn.qkv(seen[0])[..., :32].reshape(3, 17, 2, 16).transpose(1, 2)
    expected = (q @ attn.relative.p[0] * 16**-0.5)[..., None].expand(-1, -1, -1, 17).mean(0)
    assert torch.allclose(bias, expected, atol=1e-5)
    with pytest.raises(ValueError, match="pass images"):
        relative_logit_bias(model, 0)


def test_model_without_relative_encoding_is_a_clear_error():
    with pytest.raises(ValueError, match="no relative encoding \\(relative='none'\\)"):
        relative_logit_bias(tiny_model({"absolute": "none"}))


def test_reference_lattice_spreads_over_the_grid():
    assert reference_lattice((14, 14)) == [(r, c) for r in (0, 3, 6, 10, 13) for c in (0, 3, 6, 10, 13)]
    assert reference_lattice((2, 3), 5) == [(r, c) for r in (0, 1) for c in (0, 1, 2)]


def test_bucket_maps_follow_the_methods_directions():
    grid, centre = (7, 7), (3, 3)
    product, count = bucket_maps("product", grid, [centre])
    assert product.shape == (1, 7, 7) and count == 49
    # ratio 1.9: g(2) = 2 and g(3) = round(1.9 + ln(3 / 1.9) / ln 8 * 1.9) = 2, so offsets -3..3 use 5 ids per axis
    assert product[0].unique().numel() == 25
    assert product[0, 3, 0] == product[0, 3, 1] != product[0, 3, 2]
    assert product[0, 3, 2] != product[0, 3, 4]  # directed: left and right neighbours differ
    euclidean, _ = bucket_maps("euclidean", grid, [centre])
    assert euclidean[0, 3, 2] == euclidean[0, 3, 4] == euclidean[0, 2, 3]  # undirected: same distance, same bucket
    cross, _ = bucket_maps("cross", grid, [centre, (0, 0)])
    assert cross.shape == (2, 2, 7, 7)
    assert (cross[0, 0] == cross[0, 0, :, :1]).all()  # row buckets depend on the row offset only
    assert (cross[1, 0] == cross[1, 0, :1, :]).all()
    with pytest.raises(ValueError, match="product"):
        bucket_maps("manhattan", grid, [centre])


def test_swin_bias_lives_on_one_window_of_each_stage():
    model = tiny_pyramid("swin", img_size=64)  # grids 32, 16, 8, 4 in 4x4 windows
    layers = relative_attention_layers(model)
    assert [(layer.stage, layer.block) for layer in layers] == [(0, 0), (1, 0), (2, 0), (3, 0)]
    assert all(layer.windowed and layer.view(model, (64, 64)) == ((4, 4), 0) for layer in layers)
    stage2 = model.stages[2].blocks[0].attn.relative
    with torch.no_grad():
        stage2.table.normal_()  # a trained bias, far from its 0.02 init
    bias = relative_logit_bias(model, 2)
    assert bias.shape == (3, 16, 16) and torch.equal(bias, stage2.position_bias((4, 4), 0).float())
    # Swin's bias depends only on the offset: the same for every query/key pair one row apart
    maps = bias_maps(bias, (4, 4), [(1, 1), (2, 2)], 0)
    assert torch.equal(maps[:, 0, 0, 0], maps[:, 1, 1, 1])


def test_pyramid_content_dependent_bias_is_the_mean_over_windows_and_images():
    model = tiny_pyramid("swin", {"relative": "irpe:product:ctx:k"}, img_size=64)
    with torch.no_grad():
        for p in model.stages[0].blocks[0].attn.relative.parameters():
            p.normal_()  # iRPE's contextual tables start at zero
    images = torch.randn(2, 3, 64, 64)
    bias = relative_logit_bias(model, 0, images)
    assert bias.shape == (1, 16, 16) and torch.isfinite(bias).all() and bias.abs().max() > 1e-3
    each = [relative_logit_bias(model, 0, images[i : i + 1]) for i in range(2)]
    assert torch.allclose(bias, (each[0] + each[1]) / 2, atol=1e-5)
