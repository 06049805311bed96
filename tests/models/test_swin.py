"""The Swin host: the released parameter count, exact PEG / LaPE / iRPE additions, patch merging,
shifted blocks, relative encodings built per window and trained inside the windows."""

import pytest
import torch

import vitpos
from vitpos import PyramidConfig
from vitpos.models.swin import PatchMerging

from ..conftest import TINY_SWIN

SWIN_T_HEADS_PER_BLOCK = [3] * 2 + [6] * 2 + [12] * 6 + [24] * 2


def count(name: str, **overrides) -> int:
    with torch.device("meta"):
        model = vitpos.create_model(name, **overrides)
    return sum(p.numel() for p in model.parameters())


def test_swin_tiny_parameter_count_equals_the_released_model():
    """microsoft/Swin-Transformer's ``SwinTransformer`` with ``configs/swin/swin_tiny_patch4_window7_224.yaml``
    (1,000 classes) holds 28,288,354 parameters; the paper rounds them to 28M."""
    assert count("swin_tiny") == 28_288_354


def test_swin_tiny_relative_tables_hold_one_entry_per_head_and_window_offset():
    tables = sum(h * (2 * 7 - 1) ** 2 for h in SWIN_T_HEADS_PER_BLOCK)
    assert tables == 23_322
    assert count("swin_tiny") - count("swin_tiny", relative="none") == tables
    with torch.device("meta"):
        model = vitpos.create_model("swin_tiny")
    shapes = [tuple(b.attn.relative.table.shape) for s in model.stages for b in s.blocks]
    assert shapes == [(h, 169) for h in SWIN_T_HEADS_PER_BLOCK]


def test_peg_gap_variant_swaps_the_tables_for_one_peg_per_stage():
    pegs = sum((3 * 3 + 1) * c for c in (96, 192, 384, 768))
    assert count("swin_tiny_peg_gap") == count("swin_tiny") - 23_322 + pegs


def test_lape_variant_adds_a_gamma_and_beta_per_head_and_block():
    assert count("swin_tiny_lape") - count("swin_tiny") == 2 * sum(SWIN_T_HEADS_PER_BLOCK)


def test_irpe_variants_replace_the_tables_with_product_buckets():
    buckets = 7 * 7  # product method, ratio 1.9: 7 buckets per axis, no class-token bucket
    bias = sum(h * buckets for h in SWIN_T_HEADS_PER_BLOCK)  # unshared, on keys
    ctx = 12 * 3 * buckets * 32  # shared by the heads, on q, k and v, head width 32 in every stage
    base = count("swin_tiny", relative="none")
    assert count("swin_tiny_irpe_bias") - base == bias
    assert count("swin_tiny_irpe_ctx") - base == ctx


def test_swin_tiny_layout():
    with torch.device("meta"):
        model = vitpos.create_model("swin_tiny")
    assert [s.blocks[0].attn.window_size for s in model.stages] == [7] * 4
    assert [[b.attn.shifted for b in s.blocks] for s in model.stages][2] == [False, True] * 3
    assert [type(d).__name__ for d in model.downsamples] == ["NormedPatchEmbed"] + ["PatchMerging"] * 3
    assert [b.drop_path1.p for s in model.stages for b in s.blocks] == pytest.approx([0.2 * i / 11 for i in range(12)])
    # at 224 the last stage is one 7x7 window: Swin's rule, no shift and no mask
    layout = model.stages[3].blocks[1].attn.layout(model.cfg.stage_grid(3))
    assert layout.shift == (0, 0) and not layout.needs_mask


def test_patch_merging_matches_swins_channel_order():
    merge = PatchMerging(3, 5)
    x = torch.randn(2, 3, 4, 6)
    tokens, grid = merge(x)
    hwc = x.permute(0, 2, 3, 1)  # Swin works on (B, H, W, C)
    x0, x1, x2, x3 = hwc[:, 0::2, 0::2], hwc[:, 1::2, 0::2], hwc[:, 0::2, 1::2], hwc[:, 1::2, 1::2]
    reference = merge.reduction(merge.norm(torch.cat([x0, x1, x2, x3], -1).reshape(2, -1, 12)))
    assert grid == (2, 3) and torch.allclose(tokens, reference)
    assert merge.reduction.bias is None


@pytest.mark.parametrize("size", [(224, 224), (256, 192), (160, 320)])
def test_swin_tiny_stage_shapes(size):
    with torch.device("meta"):
        maps = vitpos.create_model("swin_tiny").forward_features(torch.empty(1, 3, *size))
    h, w = size
    assert [m.shape for m in maps] == [(1, 96 * 2**s, h // 2 ** (s + 2), w // 2 ** (s + 2)) for s in range(4)]


RELATIVES = ["swin", "irpe:product:bias:k:unshared", "irpe:product:ctx:qkv", "irpe:euclidean:ctx:qk", "rope2d"]


@pytest.mark.parametrize("relative", RELATIVES)
def test_relative_encodings_are_built_per_window(relative):
    model = vitpos.create_model(PyramidConfig(**TINY_SWIN), absolute="none", relative=relative)
    for stage, heads in zip(model.stages, model.cfg.num_heads, strict=True):
        assert all(block.attn.relative is not None for block in stage.blocks)
        if relative == "swin":  # a table for the 3x3 window: (2*3 - 1)^2 offsets per head
            assert all(block.attn.relative.table.shape == (heads, 25) for block in stage.blocks)
    assert model(torch.randn(2, 3, 48, 32)).shape == (2, 5)
    # with random tables every stage's windows see the encoding (rope2d has no table and acts anyway)
    plain = vitpos.create_model(PyramidConfig(**TINY_SWIN), absolute="none", relative="none").double().eval()
    model = model.double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(std=0.3)
        plain.load_state_dict(model.state_dict(), strict=False)
        grids = model.stage_grids((48, 32))
        for stage, bare, grid, width in zip(model.stages, plain.stages, grids, model.embed_dims, strict=True):
            x = torch.randn(2, grid[0] * grid[1], width, dtype=torch.float64)
            assert not torch.allclose(stage(x, grid, 0), bare(x, grid, 0), atol=1e-4)


def test_lape_normalises_the_window_bias_of_every_block():
    model = vitpos.create_model(PyramidConfig(**TINY_SWIN), absolute="none", relative="swin", join="lape").eval()
    for stage in model.stages:
        for block in stage.blocks:
            rel = block.attn.relative
            raw = rel.encoding.position_bias((3, 3), 0)  # the block's own Swin table on a 3x3 window
            # gamma = 1, beta = 0 at the start: a plain LayerNorm over the keys (eps 1e-5, nn.LayerNorm's)
            assert torch.allclose(rel.position_bias((3, 3), 0), torch.nn.functional.layer_norm(raw, (9,)), atol=1e-5)


@pytest.mark.parametrize("name,eps", [("swin_tiny", 1e-5), ("pvt_tiny", 1e-6), ("deit_tiny_patch16_224", 1e-6)])
def test_layer_norms_use_each_papers_epsilon(name, eps):
    """Swin's code uses nn.LayerNorm's default 1e-5 everywhere; PVT and DeiT use 1e-6."""
    with torch.device("meta"):
        model = vitpos.create_model(name)
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    block_norms = [m for n, m in model.named_modules() if n.endswith(("norm1", "norm2"))]
    assert block_norms and all(m.eps == eps for m in block_norms)
    assert model.norm.eps == eps and len(norms) > len(block_norms)


def test_swin_small_has_the_published_size():
    # Swin Table 1: Swin-S, 50M parameters; LaPE Table 1 normalises its window bias per block
    with torch.device("meta"):
        small, lape = vitpos.create_model("swin_small"), vitpos.create_model("swin_small_lape")
    assert sum(p.numel() for p in small.parameters()) == 49_606_258
    assert round(sum(p.numel() for p in small.parameters()) / 1e6) == 50
    assert small.cfg.depths == (2, 2, 18, 2) and small.cfg.drop_path_rate == 0.3
    assert sum(p.numel() for p in lape.parameters()) > sum(p.numel() for p in small.parameters())
