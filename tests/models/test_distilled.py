"""DeiT with a distillation token: the papers' sizes, the prefix order, the averaged heads, every grid."""

import pytest
import torch

import vitpos

EXACT = {
    "deit_tiny_distilled_patch16_224": (5_910_800, 5.9, 192),
    "deit_small_distilled_patch16_224": (22_436_432, 22.4, 384),
}
TINY = dict(embed_dim=16, depth=2, num_heads=2, patch_size=4, img_size=16, num_classes=5)


def count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", sorted(EXACT))
def test_parameter_counts(name):
    exact, millions, dim = EXACT[name]
    with torch.device("meta"):
        model, lape = vitpos.create_model(name), vitpos.create_model(f"{name}_lape")
        plain = vitpos.create_model(name.replace("_distilled", ""))
    assert count(model) == exact and round(count(model) / 1e6, 1) == millions
    # the token, its position row and the second head (D x 1000 + 1000)
    assert count(model) - count(plain) == 2 * dim + dim * 1000 + 1000
    assert count(lape) - count(model) == 2 * dim * 12


@pytest.mark.parametrize(("hw", "reg_tokens"), [((16, 16), 0), ((24, 32), 2), ((12, 20), 1)])
def test_shapes_and_prefix_order_at_several_grids(hw, reg_tokens):
    model = vitpos.create_model("deit_tiny_distilled_patch16_224", **TINY, reg_tokens=reg_tokens).eval()
    assert model.num_prefix_tokens == 2 + reg_tokens
    x = torch.randn(2, 3, *hw)
    tokens = model.forward_tokens(x)
    assert tokens.shape == (2, 2 + reg_tokens + (hw[0] // 4) * (hw[1] // 4), 16)
    logits, dist_logits = model.distilled_logits(tokens)
    torch.testing.assert_close(model(x), (logits + dist_logits) / 2)
    torch.testing.assert_close(logits, model.head(tokens[:, 0]))
    torch.testing.assert_close(dist_logits, model.head_dist(tokens[:, 1]))
    pooled = model.forward_head(tokens, pre_logits=True)
    torch.testing.assert_close(pooled, (tokens[:, 0] + tokens[:, 1]) / 2)


def test_the_distillation_token_is_the_second_prefix_token():
    model = vitpos.create_model("deit_tiny_distilled_patch16_224", **TINY, reg_tokens=1)
    assert model.prefix_parameters() == [model.cls_token, model.dist_token, model.reg_token]
    assert {"cls_token", "dist_token", "reg_token"} <= model.no_weight_decay()


def test_distillation_needs_a_class_token():
    with pytest.raises(vitpos.ConfigError, match="distilled=True needs the class token"):
        vitpos.get_config("deit_tiny_distilled_patch16_224", head="gap")


def test_a_plain_model_has_no_distilled_logits():
    model = vitpos.create_model("deit_tiny_patch16_224", **TINY)
    with pytest.raises(vitpos.VitposError, match="build it with distilled=True"):
        model.distilled_logits(model.forward_tokens(torch.randn(1, 3, 16, 16)))
