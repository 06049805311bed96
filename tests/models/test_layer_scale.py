"""LayerScale (``layer_scale``) and the learned table without prefix rows (``learned:noprefix``) on ViT hosts:
parameter counts, any slot value, and equality with a literal forward pass."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import vitpos
from vitpos.errors import ConfigError
from vitpos.models.factory import get_config

SMALL = dict(embed_dim=64, depth=2, num_heads=2, patch_size=8, img_size=32, num_classes=5)
SLOTS = [
    dict(),
    dict(join="shared"),
    dict(join="unshared"),
    dict(join="lape"),
    dict(absolute="sincos2d", conditional="peg@0"),
    dict(absolute="none", relative="rope2d:mixed"),
    dict(relative="irpe:product:ctx:k"),
    dict(absolute="fourier", relative="rope2d"),
]


def count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_deit3_small_has_deit_smalls_parameters_plus_layer_scale_less_the_class_row():
    with torch.device("meta"):
        deit = count(vitpos.create_model("deit_small_patch16_224"))
        deit3 = count(vitpos.create_model("deit3_small_patch16_224"))
        rope = count(vitpos.create_model("rope_mixed_deit_small_patch16_LS"))
    assert deit == 22_050_664
    assert deit3 == deit + 2 * 384 * 12 - 384 == 22_059_496  # timm's deit3_small_patch16_224: 22.06M
    assert rope == deit3 - 196 * 384 + 12 * 2 * 6 * 32  # no table; (x, y) frequencies per head and pair


@pytest.mark.parametrize("slots", SLOTS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()) or "default")
def test_layer_scale_adds_two_vectors_a_block_with_any_slot_value(slots):
    plain = vitpos.create_model("deit_tiny_patch16_224", **SMALL, **slots)
    scaled = vitpos.create_model("deit_tiny_patch16_224", **SMALL, **slots, layer_scale=0.1)
    assert count(scaled) - count(plain) == 2 * 64 * 2
    assert all(torch.equal(b.ls1.gamma, torch.full((64,), 0.1)) for b in scaled.stages[0].blocks)
    x = torch.randn(2, 3, 32, 48)  # another grid, not square
    assert scaled(x).shape == (2, 5)
    scaled(x).sum().backward()
    assert all(b.ls2.gamma.grad is not None and b.ls2.gamma.grad.abs().sum() > 0 for b in scaled.stages[0].blocks)


@pytest.mark.parametrize("join", ["input", "shared", "unshared", "lape"])
def test_a_table_without_prefix_rows_drops_only_the_class_row(join):
    with_row = vitpos.create_model("deit_tiny_patch16_224", **SMALL, join=join)
    without = vitpos.create_model("deit_tiny_patch16_224", **SMALL, join=join, absolute="learned:noprefix:std=0.5")
    assert count(with_row) - count(without) == 64
    assert without.stages[0].absolute.prefix_table is None
    assert without(torch.randn(1, 3, 40, 24)).shape == (1, 5)


def test_layer_scale_must_be_positive():
    with pytest.raises(ConfigError, match="layer_scale"):
        vitpos.create_model("deit_tiny_patch16_224", layer_scale=0.0)


def _literal(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """A DeiT III forward written out: no position for the class token, each branch scaled before its residual."""
    stage, heads = model.stages[0], 2
    conv = model.downsamples[0].proj
    t = F.conv2d(x, conv.weight, conv.bias, stride=8).flatten(2).transpose(1, 2)
    t = torch.cat([model.cls_token.expand(len(x), -1, -1), t + stage.absolute.table], dim=1)
    for block in stage.blocks:
        h = F.layer_norm(t, (64,), block.norm1.weight, block.norm1.bias, 1e-6)
        b, n, c = h.shape
        q, k, v = (
            F.linear(h, block.attn.qkv.weight, block.attn.qkv.bias).view(b, n, 3, heads, -1).permute(2, 0, 3, 1, 4)
        )
        attn = (q @ k.transpose(-2, -1) * (c // heads) ** -0.5).softmax(-1)
        out = F.linear((attn @ v).transpose(1, 2).reshape(b, n, c), block.attn.proj.weight, block.attn.proj.bias)
        t = t + block.ls1.gamma * out
        h = F.layer_norm(t, (64,), block.norm2.weight, block.norm2.bias, 1e-6)
        mlp = F.linear(
            F.gelu(F.linear(h, block.mlp.fc1.weight, block.mlp.fc1.bias)), block.mlp.fc2.weight, block.mlp.fc2.bias
        )
        t = t + block.ls2.gamma * mlp
    t = F.layer_norm(t, (64,), model.norm.weight, model.norm.bias, 1e-6)
    return F.linear(t[:, 0], model.head.weight, model.head.bias)


def test_layer_scale_and_a_prefix_free_table_equal_a_literal_forward():
    torch.manual_seed(0)
    model = vitpos.create_model("deit_tiny_patch16_224", **SMALL, absolute="learned:noprefix", layer_scale=1e-4)
    model = model.double().eval()
    with torch.no_grad():
        for block in model.stages[0].blocks:  # random non-zero factors, so a swapped or missing one shows
            block.ls1.gamma.uniform_(0.5, 1.5)
            block.ls2.gamma.uniform_(-1.5, -0.5)
    x = torch.randn(2, 3, 32, 32, dtype=torch.float64)
    torch.testing.assert_close(model(x), _literal(model, x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["pvt_tiny", "swin_tiny", "ceit_tiny", "t2t_vit_7", "cct_7_3x1", "detr_tiny_sine"])
def test_every_host_takes_layer_scale_on_each_block(name):
    cfg = get_config(name)
    with torch.device("meta"):
        plain = count(vitpos.create_model(name))
        scaled = count(vitpos.create_model(name, layer_scale=1e-4))
    assert scaled - plain == 2 * sum(s.context.embed_dim * s.context.depth for s in cfg.stages)
