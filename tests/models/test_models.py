"""The ViT host: shapes at many grids, parameter counts, heads, bad input."""

import pytest
import torch

import vitpos
from vitpos.registry import ABSOLUTE

from ..conftest import TINY


@pytest.mark.parametrize(
    "name,expected",
    [
        ("deit_tiny_patch16_224", 5_717_416),
        ("deit_small_patch16_224", 22_050_664),
        ("deit_base_patch16_224", 86_567_656),
    ],
)
def test_deit_parameter_counts(name, expected):
    with torch.device("meta"):
        model = vitpos.create_model(name)
    assert sum(p.numel() for p in model.parameters()) == expected


def test_vit_lite_7_4_shape():
    cfg = vitpos.get_config("vit_lite_7_4")
    assert (cfg.depth, cfg.embed_dim, cfg.num_heads, cfg.mlp_ratio, cfg.patch_size, cfg.img_size) == (
        7,
        256,
        4,
        2.0,
        4,
        32,
    )
    model = vitpos.create_model("vit_lite_7_4")
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)


@pytest.mark.parametrize("absolute", ABSOLUTE.names())
@pytest.mark.parametrize("head", ["cls", "gap"])
@pytest.mark.parametrize("size", [(32, 32), (24, 40), (64, 48), (8, 8)])
def test_every_absolute_encoding_at_every_grid(absolute, head, size):
    model = vitpos.create_model("vit_lite_7_4", **TINY, absolute=absolute, head=head)
    x = torch.randn(3, 3, *size)
    feats = model.forward_tokens(x)
    grid = model.stage_grids(size)[-1]
    assert feats.shape == (3, model.num_prefix_tokens + grid[0] * grid[1], 32)
    (features,) = model.forward_features(x)
    torch.testing.assert_close(features.flatten(2).transpose(1, 2), feats[:, model.num_prefix_tokens :])
    assert model.forward_head(feats).shape == (3, 5)
    assert model.forward_head(feats, pre_logits=True).shape == (3, 32)


def test_register_tokens_and_batch_one():
    model = vitpos.create_model("vit_lite_7_4", **TINY, reg_tokens=2, absolute="sincos2d")
    assert model.num_prefix_tokens == 3
    assert model.forward_tokens(torch.randn(1, 3, 16, 40)).shape == (1, 3 + 2 * 5, 32)


def test_gap_head_averages_patch_tokens():
    model = vitpos.create_model("vit_lite_7_4", **TINY, head="gap").eval()
    x = torch.randn(2, 3, 32, 32)
    feats = model.forward_tokens(x)
    assert model.cls_token is None
    assert torch.allclose(model.forward_head(feats, pre_logits=True), feats.mean(1))


def test_fused_and_explicit_attention_agree():
    model = vitpos.create_model("vit_lite_7_4", **TINY).eval()
    x = torch.randn(2, 3, 32, 32)
    fused = model(x)
    for block in model.stages[0].blocks:
        block.attn.path = "explicit"
    assert torch.allclose(fused, model(x), atol=1e-5)


def test_gradients_reach_position_parameters_through_the_model():
    for absolute in ("learned", "learnable_sincos", "fourier"):
        model = vitpos.create_model("vit_lite_7_4", **TINY, absolute=absolute)
        model(torch.randn(2, 3, 40, 24)).sum().backward()  # off the native grid
        for name, p in model.stages[0].absolute.named_parameters():
            assert p.grad is not None and p.grad.abs().sum() > 0, (absolute, name)


def test_padding_on_request_and_error_otherwise():
    model = vitpos.create_model("vit_lite_7_4", **TINY)
    with pytest.raises(ValueError, match="not divisible by the patch size 8"):
        model(torch.randn(1, 3, 30, 32))
    padded = vitpos.create_model("vit_lite_7_4", **TINY, pad_to_patch=True)
    assert padded.forward_tokens(torch.randn(1, 3, 30, 33)).shape == (1, 1 + 4 * 5, 32)


def test_wrong_input_shape_is_a_clear_error():
    model = vitpos.create_model("vit_lite_7_4", **TINY)
    with pytest.raises(ValueError, match=r"expected images of shape \(B, 3, H, W\)"):
        model(torch.randn(3, 32, 32))
    with pytest.raises(ValueError, match=r"\(B, 3, H, W\)"):
        model(torch.randn(1, 1, 32, 32))


def test_no_weight_decay_names_position_parameters():
    model = vitpos.create_model("vit_lite_7_4", **TINY)
    assert model.no_weight_decay() == {"cls_token", "stages.0.absolute.table", "stages.0.absolute.prefix_table"}
