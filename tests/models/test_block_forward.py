"""The one block forward: the ViT, CeiT and Compact blocks compute their papers' layers through it."""

import pytest
import torch

from vitpos.models.ceit import CeiTBlock
from vitpos.models.compact import CompactBlock
from vitpos.models.layers import Block

DIM, HEADS, GRID, PREFIX = 12, 3, (3, 4), 1


def vit_layer(block, x, pos, qk_pos):
    """Pre-norm: ``x + attn(norm1(x) + pos)``, then ``x + mlp(norm2(x))``."""
    x = x + block.drop_path1(block.attend(x, GRID, PREFIX, pos, qk_pos))
    return x + block.drop_path2(block.mlp(block.norm2(x)))


def ceit_layer(block, x, pos, qk_pos):
    """The ViT layer with LeFF on the token map as its feed-forward."""
    x = x + block.drop_path1(block.attend(x, GRID, PREFIX, pos, qk_pos))
    return x + block.drop_path2(block.mlp(block.norm2(x), GRID, PREFIX))


def compact_layer(block, x, pos, qk_pos):
    """The Compact Transformers' layer: ``x = norm2(x + attn(norm1(x) + pos))``, then ``x + mlp(x)``."""
    x = block.norm2(x + block.drop_path1(block.attend(x, GRID, PREFIX, pos, qk_pos)))
    return x + block.drop_path2(block.mlp(x))


LAYERS = [(Block, vit_layer), (CeiTBlock, ceit_layer), (CompactBlock, compact_layer)]


def _random_block(cls) -> Block:
    torch.manual_seed(0)
    block = cls(DIM, HEADS, drop_path=0.4).double()
    with torch.no_grad():
        for p in block.parameters():
            p.copy_(torch.randn_like(p) * 0.3)  # no zero table, no unit norm: every term counts
    return block


@pytest.mark.parametrize(("cls", "layer"), LAYERS, ids=["vit", "ceit", "compact"])
@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_each_block_computes_its_papers_layer(cls, layer, training):
    block = _random_block(cls).train(training)
    x = torch.randn(4, PREFIX + GRID[0] * GRID[1], DIM, dtype=torch.float64, requires_grad=True)
    pos = torch.randn(1, x.shape[1], DIM, dtype=torch.float64)
    qk_pos = torch.randn(1, x.shape[1], DIM, dtype=torch.float64)
    for p, q in [(None, None), (pos, None), (pos, qk_pos)]:
        torch.manual_seed(1)  # the same drop-path draws
        got = block(x, GRID, PREFIX, p, q)
        torch.manual_seed(1)
        want = layer(block, x, p, q)
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        (grad,) = torch.autograd.grad(got.square().sum(), x)
        (ref,) = torch.autograd.grad(want.square().sum(), x)
        torch.testing.assert_close(grad, ref, rtol=0, atol=0)


def test_the_hosts_blocks_differ_where_their_papers_do():
    x = torch.randn(2, PREFIX + GRID[0] * GRID[1], DIM, dtype=torch.float64)
    out = {cls: _random_block(cls).eval()(x, GRID, PREFIX) for cls in (Block, CompactBlock)}
    assert not torch.allclose(out[Block], out[CompactBlock])  # the same weights, the second norm elsewhere
    assert "forward" not in vars(CeiTBlock) and "forward" not in vars(CompactBlock)  # one forward, in Block
