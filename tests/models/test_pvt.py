"""The PVT host: the released parameter counts, exact PEG additions, spatial-reduction attention."""

import pytest
import torch

import vitpos
from vitpos import PyramidConfig
from vitpos.models.layers import Attention
from vitpos.models.pvt import SpatialReductionAttention

from ..conftest import TINY_PVT


def count(name: str, **overrides) -> int:
    with torch.device("meta"):
        model = vitpos.create_model(name, **overrides)
    return sum(p.numel() for p in model.parameters())


RELEASED_COUNTS = {"pvt_tiny": 13_229_288, "pvt_small": 24_485_864}
"""``pvt_tiny()`` and ``pvt_small()`` of whai362/PVT's ``classification/pvt.py`` (v1; 1,000 classes,
224x224) counted with ``sum(p.numel() for p in model.parameters())``; the paper rounds them to 13.2M and 24.5M."""


@pytest.mark.parametrize("name", sorted(RELEASED_COUNTS))
def test_parameter_counts_equal_the_released_models(name):
    assert count(name) == RELEASED_COUNTS[name]


@pytest.mark.parametrize("size", ["tiny", "small"])
def test_peg_gap_adds_exactly_one_depthwise_conv_per_stage(size):
    """CPVT's PVT+PEG+GAP: drop the per-stage tables and the class token, add (3*3 + 1)*C_s per stage."""
    cfg = vitpos.get_config(f"pvt_{size}")
    tables = sum(h * w * c for (h, w), c in zip((cfg.stage_grid(s) for s in range(4)), cfg.embed_dims, strict=True))
    class_token_and_its_row = 2 * cfg.embed_dims[-1]
    pegs = sum((3 * 3 + 1) * c for c in cfg.embed_dims)
    assert pegs == 10_240
    assert count(f"pvt_{size}_peg_gap") == count(f"pvt_{size}") - tables - class_token_and_its_row + pegs


def test_pvt_tiny_layout():
    with torch.device("meta"):
        model = vitpos.create_model("pvt_tiny")
    kernels = [down.proj.kernel_size for down in model.downsamples]
    assert kernels == [(4, 4), (2, 2), (2, 2), (2, 2)]
    ratios = [getattr(stage.blocks[0].attn, "sr_ratio", 1) for stage in model.stages]
    assert ratios == [8, 4, 2, 1]
    assert type(model.stages[3].blocks[0].attn) is Attention  # ratio 1: plain attention, no reduction layers
    assert [len(s.blocks) for s in model.stages] == [2, 2, 2, 2]
    assert [s.blocks[0].mlp.fc1.out_features for s in model.stages] == [512, 1024, 1280, 2048]
    rates = [b.drop_path1.p for s in model.stages for b in s.blocks]
    assert rates == pytest.approx([0.1 * i / 7 for i in range(8)])  # linear over all 8 blocks


def reference_sra(attn: SpatialReductionAttention, x: torch.Tensor, grid, prefix: int) -> torch.Tensor:
    """PVT's attention written out per head with separate q and kv projections."""
    b, _n, c = x.shape
    d = attn.head_dim
    wq, wkv = attn.qkv.weight[:c], attn.qkv.weight[c:]
    bq, bkv = attn.qkv.bias[:c], attn.qkv.bias[c:]
    patches = x[:, prefix:].transpose(1, 2).reshape(b, c, *grid)
    reduced = attn.norm(attn.sr(patches).flatten(2).transpose(1, 2))
    keys_in = torch.cat([x[:, :prefix], reduced], dim=1)
    q = x @ wq.t() + bq
    kv = keys_in @ wkv.t() + bkv
    k, v = kv[..., :c], kv[..., c:]
    heads = []
    for h in range(attn.num_heads):
        sl = slice(h * d, (h + 1) * d)
        weights = (q[..., sl] @ k[..., sl].transpose(1, 2) * d**-0.5).softmax(-1)
        heads.append(weights @ v[..., sl])
    return attn.proj(torch.cat(heads, dim=-1))


@pytest.mark.parametrize("grid,ratio,prefix", [((8, 8), 4, 0), ((6, 10), 2, 0), ((4, 4), 2, 1), ((8, 12), 4, 1)])
def test_spatial_reduction_attention_equals_reference(grid, ratio, prefix):
    attn = SpatialReductionAttention(12, 3, ratio).eval()
    x = torch.randn(2, prefix + grid[0] * grid[1], 12)
    assert torch.allclose(attn(x, grid, prefix), reference_sra(attn, x, grid, prefix), atol=1e-5)


def test_spatial_reduction_needs_a_grid_at_least_the_ratio():
    with pytest.raises(ValueError, match=r"needs a grid of at least 8x8, got 4x4"):
        SpatialReductionAttention(8, 1, 8)(torch.randn(1, 16, 8), (4, 4), 0)


def test_full_attention_without_reduction_ratios():
    model = vitpos.create_model(PyramidConfig(**{**TINY_PVT, "sr_ratios": None}))
    assert all(type(s.blocks[0].attn) is Attention for s in model.stages)
    assert model(torch.randn(1, 3, 32, 48)).shape == (1, 5)


@pytest.mark.parametrize(
    "relative,head",
    [("swin", "cls"), ("irpe:product:ctx:qkv", "cls"), ("irpe:product:bias:k", "gap"), ("rope2d", "cls")],
)
def test_relative_encodings_under_full_attention(relative, head):
    """Without spatial reduction keys sit on the query grid, so every relative encoding applies,
    with the class token of the last stage included."""
    model = vitpos.create_model(PyramidConfig(**{**TINY_PVT, "sr_ratios": None}), head=head, relative=relative)
    assert all(b.attn.relative is not None for s in model.stages for b in s.blocks)
    model(torch.randn(2, 3, 16, 32)).sum().backward()
    assert all(p.grad is not None for n, p in model.named_parameters() if ".relative." in n)
