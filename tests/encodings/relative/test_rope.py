"""2-D rotary embeddings: angles by hand, relativity of the logits, prefix tokens, learned frequencies."""

import pytest
import torch

import vitpos
from vitpos.encodings.base import SlotContext
from vitpos.encodings.relative.rope import Rope2d
from vitpos.grid import grid_offsets

from ...conftest import TINY

CTX = SlotContext(embed_dim=16, num_heads=2, depth=1, grid=(4, 4), num_prefix_tokens=1)


def test_axial_angles_by_hand():
    rope = Rope2d(CTX)  # head width 8, theta 100: magnitudes 1 and 100^(-1/2) = 0.1
    angles = rope.angles((2, 3))
    assert angles.shape == (1, 6, 4)
    # cell 5 = row 1, column 2: x pairs turn by 2 * (1, 0.1), y pairs by 1 * (1, 0.1)
    torch.testing.assert_close(angles[0, 5], torch.tensor([2.0, 0.2, 1.0, 0.1], dtype=torch.float64))
    assert Rope2d(CTX, theta=10000.0).angles((2, 3))[0, 5, 1].item() == pytest.approx(0.02)


@pytest.mark.parametrize("variant", ["axial", "mixed"])
def test_logits_depend_only_on_the_offset(variant):
    rope = Rope2d(CTX, variant).double()
    grid = (5, 6)
    n = grid[0] * grid[1]
    # the same query and key vector at every cell: only the rotation tells cells apart
    q0, k0 = torch.randn(1, 2, 1, 8, dtype=torch.float64), torch.randn(1, 2, 1, 8, dtype=torch.float64)
    q, k = rope.relative_terms(grid, 0).rotation.apply(q0.expand(1, 2, n, 8), k0.expand(1, 2, n, 8))
    logits = (q @ k.transpose(-2, -1)).reshape(2, n * n)
    offsets = grid_offsets(grid).reshape(n * n, 2)
    for offset in offsets.unique(dim=0):
        same = logits[:, (offsets == offset).all(-1)]
        torch.testing.assert_close(same, same[:, :1].expand_as(same))
    assert logits.std(-1).min() > 1e-3


def test_prefix_tokens_are_not_rotated_and_norms_are_kept():
    rope = Rope2d(CTX, "mixed")
    q, k = torch.randn(3, 2, 2 + 12, 8), torch.randn(3, 2, 2 + 12, 8)
    rq, rk = rope.relative_terms((3, 4), 2).rotation.apply(q, k)
    assert torch.equal(rq[..., :2, :], q[..., :2, :]) and torch.equal(rk[..., :2, :], k[..., :2, :])
    torch.testing.assert_close(rq.norm(dim=-1), q.norm(dim=-1))
    assert not torch.allclose(rq[..., 3:, :], q[..., 3:, :])


def test_mixed_frequencies_are_learned_per_head_and_layer():
    model = vitpos.create_model("vit_lite_7_4", **TINY, relative="rope2d:mixed")
    freqs = [block.attn.relative.mixed_freqs for block in model.stages[0].blocks]
    assert all(f.shape == (2, 2, 8) for f in freqs)  # (x, y), heads, head_dim / 2
    assert sum(f.numel() for f in freqs) == 2 * TINY["embed_dim"]  # embed_dim per layer
    assert not torch.equal(freqs[0], freqs[1])
    # |(fx_t, fy_t)| is the axial magnitude 10^(-4t/16) (theta 10, head width 16), twice over
    magnitude = freqs[0].detach().square().sum(0).sqrt()
    expected = torch.tensor([10 ** (-t / 4) for t in range(4)] * 2)
    torch.testing.assert_close(magnitude, expected.expand(2, 8))
    axial = vitpos.create_model("vit_lite_7_4", **TINY, relative="rope2d")
    assert not list(axial.stages[0].blocks[0].attn.relative.parameters())
