"""Attention maps read through hooks, query maps and attention distance."""

import pytest
import torch

from vitpos.analysis.attention import (
    attention_maps,
    mean_attention_distance,
    patch_attention,
    query_maps,
    uniform_attention_distance,
)
from vitpos.models.layers import Attention

from .families import tiny_model


@pytest.mark.parametrize("head", ["cls", "gap"])
def test_weights_equal_a_manual_softmax_and_the_model_is_restored(head):
    model = tiny_model({"absolute": "learned"}, head=head)
    x = torch.randn(3, 3, 32, 40)  # grid 4x5
    weights = attention_maps(model, x)
    n = model.num_prefix_tokens + 20
    assert len(weights) == 2 and weights[0].shape == (3, 2, n, n)
    assert torch.allclose(weights[1].sum(-1), torch.ones(3, 2, n), atol=1e-5)
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules() if isinstance(m, Attention))
    assert model(x).shape == (3, 5)  # plain outputs again
    # block 0 by hand: the input to its attention is norm1(patch tokens + prefix + PE)
    tokens, grid = model.patch_embed(x)
    tokens = model._prepend_prefix(tokens) + model.position_encoding(grid)
    attn = model.blocks[0].attn
    qkv = attn.qkv(model.blocks[0].norm1(tokens)).reshape(3, n, 3, 2, 16).permute(2, 0, 3, 1, 4)
    expected = ((qkv[0] * attn.scale) @ qkv[1].transpose(-2, -1)).softmax(-1)
    assert torch.allclose(weights[0], expected, atol=1e-5)


def test_uniform_attention_has_the_mean_cell_distance():
    grid = (3, 4)
    uniform = torch.full((2, 1, 13, 13), 1 / 13)  # one prefix token
    distance = mean_attention_distance(uniform, grid, 1)
    assert torch.allclose(distance, torch.tensor([uniform_attention_distance(grid)]), atol=1e-6)
    identity = torch.eye(12).expand(2, 3, 12, 12)
    assert torch.allclose(mean_attention_distance(identity, grid, 0), torch.zeros(3))


def test_query_maps_and_patch_renormalisation():
    weights = torch.rand(2, 4, 1 + 6, 1 + 6).softmax(-1)
    patches = patch_attention(weights, 1)
    assert torch.allclose(patches.sum(-1), torch.ones(2, 4, 6))
    maps = query_maps(weights, (2, 3), [(1, 2), (0, 0)], 1)
    assert maps.shape == (2, 4, 2, 2, 3)
    assert torch.allclose(maps[:, :, 0].reshape(2, 4, 6), patches[:, :, 5])


def test_model_without_vitpos_attention_is_a_clear_error():
    with pytest.raises(ValueError, match="no vitpos Attention layers"):
        attention_maps(torch.nn.Linear(2, 2), torch.randn(1, 2))
