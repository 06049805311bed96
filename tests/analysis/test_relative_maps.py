"""Relative bias maps around reference patches, through the RelativePosition interface."""

import pytest
import torch
from torch import nn

from vitpos.analysis.relative_maps import bias_maps, bucket_maps, reference_lattice, relative_logit_bias
from vitpos.attention import RelativeTerms
from vitpos.encodings.relative.base import RelativeBias, RelativePosition
from vitpos.grid import grid_offsets

from .families import tiny_model


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

    def terms(self, grid, num_prefix_tokens, device=None):
        n = num_prefix_tokens + grid[0] * grid[1]
        return RelativeTerms(ids=torch.zeros(n, n, dtype=torch.long), num_buckets=1, key_table=self.p)


def test_position_bias_needs_no_input_and_maps_around_references():
    model = tiny_model({"absolute": "none"})
    model.blocks[1].attn.relative = RowOffsetBias(2)
    bias = relative_logit_bias(model, block=0)  # the first layer that has a relative encoding
    assert bias.shape == (2, 17, 17)
    maps = bias_maps(bias, (4, 4), [(0, 0), (3, 2)], 1)
    assert maps.shape == (2, 2, 4, 4)
    assert torch.equal(maps[1, 1, 0], torch.full((4,), 2 * 3.0))  # head 1, query row 3, key row 0: 2 * (3 - 0)
    assert torch.equal(maps[0, 0, 2], torch.full((4,), -2.0))


def test_content_dependent_bias_is_evaluated_on_the_captured_queries():
    model = tiny_model({"absolute": "learned"})
    model.blocks[0].attn.relative = QueryDotBias(16)
    images = torch.randn(3, 3, 32, 32)
    bias = relative_logit_bias(model, 0, images)
    tokens, grid = model.patch_embed(images)
    h = model.blocks[0].norm1(model._prepend_prefix(tokens) + model.position_encoding(grid))
    q = model.blocks[0].attn.qkv(h)[..., :32].reshape(3, 17, 2, 16).transpose(1, 2)
    expected = (q @ model.blocks[0].attn.relative.p[0] * 16**-0.5)[..., None].expand(-1, -1, -1, 17).mean(0)
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
