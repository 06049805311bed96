"""CeiT-T/S: the paper's sizes, the I2T grid, LeFF on the patch tokens only, LCA as the class token, every slot."""

import pytest
import torch

import vitpos
from vitpos.models.ceit_layers import LocallyEnhancedFeedForward

EXACT = {"ceit_tiny": (6_356_904, 6.4, 192), "ceit_small": (24_204_840, 24.2, 384)}
TINY = dict(embed_dim=16, depth=2, num_heads=2, patch_size=2, stem_channels=8, img_size=32, num_classes=3)


def count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", sorted(EXACT))
def test_parameter_counts_are_the_papers(name):
    # CeiT Table 2: CeiT-T 6.4M, CeiT-S 24.2M
    exact, millions, dim = EXACT[name]
    with torch.device("meta"):
        model, lape = vitpos.create_model(name), vitpos.create_model(f"{name}_lape")
    assert count(model) == exact and round(count(model) / 1e6, 1) == millions
    assert count(lape) - count(model) == 2 * dim * 12


@pytest.mark.parametrize(("hw", "reg_tokens"), [((32, 32), 0), ((48, 80), 2), ((40, 24), 1)])
def test_shapes_at_several_grids_with_prefix_tokens(hw, reg_tokens):
    model = vitpos.create_model("ceit_tiny", **TINY, reg_tokens=reg_tokens).eval()
    (grid,) = model.stage_grids(hw)
    assert grid == (hw[0] // 8, hw[1] // 8)  # stride 2, max-pool 2, 2x2 patches
    x = torch.randn(2, 3, *hw)
    tokens = model.forward_tokens(x)
    assert tokens.shape == (2, 1 + reg_tokens + grid[0] * grid[1], 16)
    torch.testing.assert_close(model(x), model.head(tokens[:, 0]))
    (features,) = model.forward_features(x)
    assert features.shape == (2, 16, *grid)


def test_the_class_token_is_lca_over_every_blocks_class_token():
    model = vitpos.create_model("ceit_tiny", **TINY).eval()
    x = torch.randn(2, 3, 32, 32)
    tokens, grid = model.downsamples[0](x)
    stage = model.stages[0]
    h = stage.pos_drop(model._prepend_prefix(tokens) + stage.position_encoding(grid))
    per_block = []
    for block in stage.blocks:
        h = block(h, grid, 1)
        per_block.append(h[:, 0])
    summary = model.lca(torch.stack(per_block, dim=1) + model.pos_layer_embed)
    torch.testing.assert_close(model.forward_tokens(x)[:, 0], model.norm(summary[:, 0]))
    torch.testing.assert_close(model.forward_tokens(x)[:, 1:], model.norm(h[:, 1:]))


def test_leff_leaves_the_prefix_tokens_and_convolves_the_patch_map():
    leff = LocallyEnhancedFeedForward(8, 16, 3).eval()
    x = torch.randn(2, 2 + 12, 8)
    out = leff(x, (3, 4), 2)
    torch.testing.assert_close(out[:, :2], x[:, :2])
    moved = x.clone()
    moved[:, 2] += 1.0  # cell (0, 0): its 3x3 neighbourhood changes, the far corner (2, 3) does not
    changed = (leff(moved, (3, 4), 2) - out).abs().amax(-1)[0, 2:].reshape(3, 4)
    assert changed[0, 0] > 0 and changed[1, 1] > 0 and changed[2, 3] == 0


@pytest.mark.parametrize(
    "slots",
    [
        {"join": "lape"},
        {"absolute": "sincos2d", "join": "lape:eta=1"},
        {"absolute": "none", "conditional": "peg@0"},
        {"absolute": "none", "relative": "irpe:product:ctx:qkv"},
        {"relative": "rope2d"},
    ],
)
def test_every_slot_trains_in_ceit(slots):
    model = vitpos.create_model("ceit_tiny", **TINY, **slots)
    model(torch.randn(2, 3, 32, 32)).square().sum().backward()
    position = model.position_parameters()
    assert position and all(p.grad is not None and p.grad.abs().sum() > 0 for p in position.values())


def test_ceit_needs_the_class_token():
    with pytest.raises(vitpos.ConfigError, match="needs the class token"):
        vitpos.get_config("ceit_tiny", head="gap")
