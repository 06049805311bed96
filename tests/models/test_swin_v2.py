"""The Swin V2 host (``swin_v2=True``) and cosine attention: config, blocks, resolutions, attention maths."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import vitpos
from vitpos.encodings.base import SlotContext
from vitpos.errors import ConfigError
from vitpos.models.layers import Attention
from vitpos.models.swin import QueryValueBiasAttention, SwinV2Block
from vitpos.registry import RELATIVE
from vitpos.spec import SlotSpec

SMALL = dict(
    embed_dims=(8, 16, 24, 32), depths=(2, 2, 2, 2), num_heads=(1, 2, 3, 4), window_size=4, patch_size=2,
    img_size=64, num_classes=5,
)  # fmt: skip
NAME = "swinv2_tiny_window8_256"


def test_swin_v2_blocks_norms_biases_and_merging():
    model = vitpos.create_model(NAME, **SMALL)
    block = model.stages[0].blocks[1]
    assert isinstance(block, SwinV2Block) and isinstance(block.attn, QueryValueBiasAttention)
    assert block.attn.logit_scale.shape == (1, 1, 1) and torch.all(block.attn.logit_scale == math.log(10))
    assert block.attn.qkv.bias is None and block.attn.projection_bias()[8:16].eq(0).all()
    assert not block.norm1.weight.any() and not block.norm2.weight.any()  # the release starts every block as x
    assert model.downsamples[1].norm.normalized_shape == (16,)  # after the reduction
    assert block.attn.region_mask == -100.0
    v1 = vitpos.create_model("swin_tiny", **SMALL)
    assert v1.downsamples[1].norm.normalized_shape == (32,) and v1.stages[0].blocks[1].attn.logit_scale is None


def test_a_fresh_swin_v2_block_is_the_identity_and_a_trained_one_is_post_norm():
    block = vitpos.create_model(NAME, **SMALL).stages[1].blocks[1].double().eval()
    x = torch.randn(2, 256, 16, dtype=torch.float64)
    torch.testing.assert_close(block(x, (16, 16), 0), x, rtol=0, atol=0)
    with torch.no_grad():
        for p in block.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    attn = block.attn(x, (16, 16), 0)
    mid = x + block.norm1(attn)
    torch.testing.assert_close(block(x, (16, 16), 0), mid + block.norm2(block.mlp(mid)))


@pytest.mark.parametrize("cosine,expected", [(None, True), (False, False), (True, True)])
def test_cosine_attention_follows_swin_v2_unless_set(cosine, expected):
    cfg = vitpos.get_config(NAME, cosine_attention=cosine, **SMALL)
    assert cfg.cosine is expected
    model = cfg.build()
    assert (model.stages[0].blocks[0].attn.logit_scale is not None) is expected
    assert type(cfg).from_dict(cfg.to_dict()) == cfg
    v1 = vitpos.get_config("swin_tiny", cosine_attention=cosine, **SMALL)
    assert v1.cosine is bool(cosine) and not v1.swin_v2


def test_swin_v2_options_on_a_pvt_backed_head_are_refused():
    with pytest.raises(ConfigError, match="swin_v2 and cosine_attention belong to a Swin backbone"):
        vitpos.get_config("pvt_tiny_fpn", swin_v2=True)
    fpn = vitpos.create_model("swin_tiny_fpn", swin_v2=True, relative="cpb", **{**SMALL, "num_classes": 3})
    assert isinstance(fpn.backbone.stages[0].blocks[0], SwinV2Block)


@pytest.mark.parametrize("size", [(64, 64), (96, 64), (48, 80), (32, 32)])
def test_the_host_runs_and_trains_at_other_and_non_square_sizes(size):
    # 96x64 and 48x80: stage grids that are no multiple of the window (padded, masked windows)
    model = vitpos.create_model(NAME, **SMALL).train()
    out = model(torch.randn(2, 3, *size))
    assert out.shape == (2, 5)
    out.square().sum().backward()
    silent = [n for n, p in model.named_parameters() if p.grad is None]
    assert not silent, silent


def literal_cosine(attn: Attention, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """softmax(cos(q_i, k_j) min(exp(s_h), 100) + B_ij) v: Swin V2's Eq. 2, written out."""
    b, n, c = x.shape
    q, k, v = attn.qkv(x).reshape(b, n, 3, attn.num_heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
    cos = torch.einsum("bhid,bhjd->bhij", q, k) / (q.norm(dim=-1)[..., :, None] * k.norm(dim=-1)[..., None, :])
    scale = torch.minimum(attn.logit_scale.exp(), torch.tensor(100.0, dtype=x.dtype))
    out = torch.einsum("bhij,bhjd->bhid", (cos * scale + bias).softmax(-1), v)
    return attn.proj(out.transpose(1, 2).reshape(b, n, c))


@pytest.mark.parametrize("path", ["sdpa", "explicit", "stored"])
def test_cosine_attention_with_cpb_on_global_attention_equals_the_equation(path):
    grid, prefix, heads = (3, 4), 1, 2
    relative = RELATIVE.get("cpb").from_spec(SlotSpec.parse("cpb"), SlotContext(16, heads, 1, grid, prefix))
    attn = Attention(16, heads, relative=relative, cosine=True).double()
    attn.path = path
    with torch.no_grad():
        for p in attn.parameters():
            p.add_(torch.randn_like(p) * 0.3)
        attn.logit_scale[0] = math.log(300.0)  # clamped to 100
    x = torch.randn(2, prefix + 12, 16, dtype=torch.float64, requires_grad=True)
    ours = attn(x, grid, prefix)
    theirs = literal_cosine(attn, x, relative.position_bias(grid, prefix))
    torch.testing.assert_close(ours, theirs, rtol=1e-10, atol=1e-12)
    (grad,) = torch.autograd.grad(ours.sum(), attn.logit_scale)
    (want,) = torch.autograd.grad(theirs.sum(), attn.logit_scale)
    torch.testing.assert_close(grad, want)
    assert grad[0].abs().sum() == 0 and grad[1].abs().sum() > 0  # the clamped head learns nothing, as in Swin V2


def test_cosine_attention_keeps_the_autocast_dtype_and_composes_with_rope():
    attn = Attention(16, 2, cosine=True)
    x = torch.randn(2, 12, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert attn(x, (3, 4), 0).dtype == torch.bfloat16
    rope = RELATIVE.get("rope2d").from_spec(SlotSpec.parse("rope2d"), SlotContext(16, 2, 1, (3, 4), 0))
    turned = Attention(16, 2, relative=rope, cosine=True).double()
    x = x.double()
    q, k, v = turned.qkv(x).reshape(2, 12, 3, 2, 8).permute(2, 0, 3, 1, 4).unbind(0)
    q, k = rope.relative_terms((3, 4), 0).rotation.apply(q, k)
    cos = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1) * 10.0  # exp(log 10)
    expected = turned.proj((cos.softmax(-1) @ v).transpose(1, 2).reshape(2, 12, 16))
    torch.testing.assert_close(turned(x, (3, 4), 0), expected)
