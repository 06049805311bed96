"""T2T-ViT-7: the paper's size, the stem's grid at any image size, every slot, autocast, the 1-D table."""

import pytest
import torch

import vitpos
from vitpos.encodings.sincos import sincos_1d
from vitpos.models.t2t_stem import TokenPerformer

TINY = dict(embed_dim=16, depth=2, num_heads=2, token_dim=8, img_size=32, num_classes=3)


def count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_parameter_count_is_the_papers():
    # T2T-ViT Table 1 (and the authors' README): T2T-ViT-7, 4.3M; its random features are buffers
    with torch.device("meta"):
        model, lape = vitpos.create_model("t2t_vit_7"), vitpos.create_model("t2t_vit_7_lape")
    assert count(model) == 4_255_694 and round(count(model) / 1e6, 1) == 4.3
    assert sum(b.numel() for b in model.buffers() if b.ndim == 2) == 2 * 32 * 64
    assert count(lape) - count(model) == 2 * 256 * 3  # LaPE on the first three layers (eta = 3)


@pytest.mark.parametrize("layer", ["performer", "transformer"])
@pytest.mark.parametrize(("hw", "reg_tokens"), [((32, 32), 0), ((48, 80), 2), ((224, 224), 1)])
def test_shapes_at_several_grids_with_prefix_tokens(layer, hw, reg_tokens):
    model = vitpos.create_model("t2t_vit_7", **TINY, t2t_layer=layer, reg_tokens=reg_tokens).eval()
    (grid,) = model.stage_grids(hw)
    assert grid == (hw[0] // 16, hw[1] // 16)  # three soft splits: strides 4, 2, 2
    x = torch.randn(1, 3, *hw)
    tokens = model.forward_tokens(x)
    assert tokens.shape == (1, 1 + reg_tokens + grid[0] * grid[1], 16)
    assert model(x).shape == (1, 3)


@pytest.mark.parametrize(
    "slots",
    [
        {"join": "lape:eta=1"},
        {"absolute": "learned", "join": "lape"},
        {"absolute": "none", "conditional": "peg@0"},
        {"absolute": "none", "relative": "irpe:product:ctx:qkv"},
        {"relative": "rope2d"},
    ],
)
def test_every_slot_trains_in_t2t(slots):
    model = vitpos.create_model("t2t_vit_7", **TINY, **slots)
    model(torch.randn(2, 3, 32, 32)).square().sum().backward()
    position = model.position_parameters()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in position.values())
    assert position or slots == {"relative": "rope2d"}  # every other combination has position parameters


def test_prefix_flag_counts_the_class_token_as_position_zero():
    model = vitpos.create_model("t2t_vit_7", **TINY, absolute="sincos1d:prefix")
    plain = vitpos.create_model("t2t_vit_7", **TINY)
    table = model.stages[0].position_encoding((2, 3))[0].double()
    torch.testing.assert_close(table, sincos_1d(torch.arange(7), 16), rtol=1e-6, atol=1e-6)
    plain_table = plain.stages[0].position_encoding((2, 3))[0].double()
    assert plain_table[0].abs().max() == 0  # without the flag the class token gets no signal
    torch.testing.assert_close(plain_table[1:], sincos_1d(torch.arange(6), 16), rtol=1e-6, atol=1e-6)


def test_performer_under_bf16_autocast_follows_float32():
    torch.manual_seed(0)
    layer = TokenPerformer(24, 16)
    x = torch.randn(2, 10, 24)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = layer(x)
    assert torch.isfinite(low).all()
    torch.testing.assert_close(low.float(), layer(x), rtol=0.05, atol=0.05)


def test_performer_attention_approximates_softmax_attention_with_many_features():
    torch.manual_seed(0)
    layer = TokenPerformer(8, 8, kernel_ratio=512.0).double()  # m = 4096 features
    with torch.no_grad():
        layer.features.copy_(torch.randn(4096, 8, dtype=torch.float64))  # i.i.d. Gaussian: unbiased for any m
        layer.proj.weight.copy_(torch.eye(8))
        layer.proj.bias.zero_()
    x = torch.randn(1, 6, 8, dtype=torch.float64) * 0.3
    k, q, v = layer.kqv(x).split(8, dim=-1)
    exact = v + torch.softmax(q @ k.transpose(1, 2), dim=-1) @ v
    torch.testing.assert_close(layer.attend(x), exact, rtol=0.05, atol=0.05)
