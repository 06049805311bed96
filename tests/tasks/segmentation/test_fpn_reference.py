"""The Semantic FPN against its computation written out with functional ops, on random weights (float64).

FPN (Lin et al. 2017): L_s = lateral_s(C_s); top-down M_S = L_S, M_s = L_s + nearest_up(M_{s+1});
P_s = output_s(M_s). Semantic FPN's head (Kirillov et al. 2019): level s passes max(1, s) stages of
3x3 conv, GroupNorm, ReLU (and a 2x bilinear upsampling for s > 0), the levels are summed, a 1x1
classifier scores each pixel and the logits are resized bilinearly to the image.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from vitpos.errors import ConfigError
from vitpos.models.factory import create_model
from vitpos.tasks.segmentation.fpn import FeaturePyramid, SemanticFPNHead

from .conftest import tiny_fpn


def randomise(module: nn.Module) -> None:
    """Non-zero random values in every weight, bias and norm parameter."""
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p) * 0.3)


def conv(x: torch.Tensor, layer: nn.Module, padding: str = "zeros") -> torch.Tensor:
    assert isinstance(layer, nn.Conv2d)
    k = layer.weight.shape[-1] // 2
    if padding != "zeros" and k:
        x = F.pad(x, (k, k, k, k), mode=padding)
        k = 0
    return F.conv2d(x, layer.weight, layer.bias, padding=k)


def written_out(maps, neck: FeaturePyramid, head: SemanticFPNHead, image_hw, padding: str = "zeros"):
    laterals = [conv(m, layer) for m, layer in zip(maps, neck.lateral, strict=True)]
    merged = [laterals[-1]]
    for lateral in reversed(laterals[:-1]):
        merged.insert(0, lateral + F.interpolate(merged[0], size=lateral.shape[-2:], mode="nearest"))
    levels = [conv(m, layer, padding) for m, layer in zip(merged, neck.output, strict=True)]
    total = None
    for s, (level, scale_head) in enumerate(zip(levels, head.scale_heads, strict=True)):
        x = level
        for k in range(max(1, s)):
            stage = scale_head[k]
            norm = stage[1]
            x = F.relu(F.group_norm(conv(x, stage[0], padding), norm.num_groups, norm.weight, norm.bias, norm.eps))
            if s > 0:
                x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
        if total is not None and x.shape[-2:] != total.shape[-2:]:
            x = F.interpolate(x, size=total.shape[-2:], mode="bilinear", align_corners=False)
        total = x if total is None else total + x
    logits = conv(total, head.classifier)
    return F.interpolate(logits, size=image_hw, mode="bilinear", align_corners=False)


@pytest.mark.parametrize("padding", ["zeros", "replicate", "circular"])
@pytest.mark.parametrize("size", [(32, 48), (48, 16), (64, 64)])
def test_semantic_fpn_is_the_written_out_computation(padding: str, size: tuple[int, int], one_thread) -> None:
    torch.manual_seed(0)
    model = create_model(tiny_fpn("pvt", conv_padding=padding, head_dropout=0.0)).double().eval()
    randomise(model.neck)
    randomise(model.head)
    x = torch.randn(2, 3, *size, dtype=torch.float64)
    maps = model.backbone.forward_features(x)
    torch.testing.assert_close(model(x), written_out(maps, model.neck, model.head, size, padding))


def test_circular_padding_makes_the_head_blind_to_the_border(one_thread) -> None:
    """With circular padding the neck and head commute with a cyclic shift of their input maps (one cell
    of the coarsest level, which is every level's whole number of cells); with zeros they do not."""
    torch.manual_seed(0)
    maps = [torch.randn(1, c, 16 // 2**s, 16 // 2**s, dtype=torch.float64) for s, c in enumerate((8, 16, 24, 32))]
    for padding, commutes in (("circular", True), ("zeros", False)):
        neck = FeaturePyramid((8, 16, 24, 32), 16, padding).double()
        randomise(neck)
        shifted = [torch.roll(m, shifts=(2 ** (3 - s), 2 ** (3 - s)), dims=(-2, -1)) for s, m in enumerate(maps)]
        out, out_shifted = neck(maps), neck(shifted)
        same = all(
            torch.allclose(torch.roll(o, shifts=(2 ** (3 - s), 2 ** (3 - s)), dims=(-2, -1)), p)
            for s, (o, p) in enumerate(zip(out, out_shifted, strict=True))
        )
        assert same == commutes, padding


def test_an_unknown_padding_is_refused() -> None:
    with pytest.raises(ConfigError, match="conv_padding"):
        tiny_fpn("pvt", conv_padding="reflect")
    with pytest.raises(ValueError, match="padding='reflect': choose one of zeros, replicate, circular"):
        FeaturePyramid((8, 16), 16, "reflect")


def test_the_heads_bilinear_upsampling_still_sees_the_border(one_thread) -> None:
    """Even with circular padding the head does not commute with cyclic shifts: its bilinear 2x
    upsampling clamps at the border (replicate padding in effect), a position cue left to a model
    with no encoding (README, "Why no encoding solves it")."""
    torch.manual_seed(0)
    levels = [torch.randn(1, 16, 16 // 2**s, 16 // 2**s, dtype=torch.float64) for s in range(4)]
    head = SemanticFPNHead(4, 16, 16, 3, groups=4, dropout=0.0, padding="circular").double().eval()
    randomise(head)
    shifted = [torch.roll(m, shifts=(2 ** (3 - s),) * 2, dims=(-2, -1)) for s, m in enumerate(levels)]
    out, out_shifted = head(levels, (16, 16)), head(shifted, (16, 16))
    assert not torch.allclose(torch.roll(out, shifts=(8, 8), dims=(-2, -1)), out_shifted)
    finest_only = SemanticFPNHead(1, 16, 16, 3, groups=4, dropout=0.0, padding="circular").double().eval()
    randomise(finest_only)  # no upsampling: it commutes
    torch.testing.assert_close(
        torch.roll(finest_only(levels[:1], (16, 16)), shifts=(8, 8), dims=(-2, -1)), finest_only(shifted[:1], (16, 16))
    )
