"""The Semantic FPN: output size, parameter counts of the presets, the host inside it."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import vitpos
from vitpos.errors import ConfigError
from vitpos.models.factory import config_from_dict, create_model
from vitpos.tasks.segmentation import SemanticFPN, SemanticFPNConfig

from .conftest import tiny_fpn

SLOTS = {
    "learned": dict(absolute="learned"),
    "none": dict(absolute="none"),
    "peg": dict(absolute="none", conditional="peg@0"),
}
SIZES = [(32, 48), (48, 16), (16, 64), (64, 32)]


@pytest.mark.parametrize("backbone", ["pvt", "swin"])
@pytest.mark.parametrize("slots", SLOTS, ids=str)
def test_logits_have_the_input_size_at_non_square_sizes(backbone: str, slots: str, one_thread) -> None:
    model = create_model(tiny_fpn(backbone, **SLOTS[slots])).eval()
    for h, w in SIZES:
        x = torch.randn(2, 3, h, w)
        out = model(x)
        assert out.shape == (2, 3, h, w)
        assert torch.isfinite(out).all()
        torch.testing.assert_close(out[1:], model(x[1:]))  # each image's logits are its own


@pytest.mark.parametrize("backbone", ["pvt", "swin"])
def test_segmentation_loss_reaches_the_position_parameters(backbone: str, one_thread) -> None:
    model = create_model(tiny_fpn(backbone, absolute="learned", conditional="peg@0"))
    logits = model(torch.randn(2, 3, 32, 48))
    F.cross_entropy(logits, torch.randint(0, 3, (2, 32, 48))).backward()
    grads = {name: p.grad for name, p in model.named_parameters() if ".absolute." in name or ".conditional." in name}
    assert len(grads) >= 8  # a table and a PEG in each of 4 stages
    assert all(g is not None and g.abs().sum() > 0 for g in grads.values())


def test_sizes_that_do_not_fit_the_stride_are_refused() -> None:
    model = create_model(tiny_fpn("pvt"))
    with pytest.raises(ValueError, match="not divisible by this pyramid's total stride 16"):
        model(torch.randn(1, 3, 40, 32))


PUBLISHED = [("pvt_tiny_fpn", 17.0), ("pvt_small_fpn", 28.2), ("pvt_tiny_peg_gap_fpn", 16.6)]


@pytest.mark.parametrize("name, millions", PUBLISHED)
def test_preset_parameter_counts(name: str, millions: float) -> None:
    """PVT's Semantic FPN sizes (PVT Table 3, CPVT Table 13: 17 and 28 M) at ADE20K's 150 classes."""
    with torch.device("meta"):
        model = create_model(name)
    assert round(sum(p.numel() for p in model.parameters()) / 1e6, 1) == millions


def test_the_host_inside_is_the_classification_preset_without_its_classifier() -> None:
    with torch.device("meta"):
        seg, host = create_model("pvt_tiny_peg_gap_fpn"), create_model("pvt_tiny_peg_gap", num_classes=0)
    inner = {k[len("backbone.") :]: v.shape for k, v in seg.state_dict().items() if k.startswith("backbone.")}
    assert inner == {k: v.shape for k, v in host.state_dict().items()}
    assert set(vitpos.list_models("*_fpn")) >= {"pvt_tiny_fpn", "pvt_tiny_peg_gap_fpn", "swin_tiny_fpn"}


def test_config_round_trips_and_checks_its_head() -> None:
    cfg = tiny_fpn("swin", absolute="sincos2d")
    again = config_from_dict(cfg.to_dict())
    assert isinstance(again, SemanticFPNConfig) and again == cfg
    assert again.backbone_config.arch == "swin" and again.backbone_config.num_classes == 0
    with pytest.raises(ConfigError, match="head_dim=16 is not divisible by norm_groups=5"):
        tiny_fpn("pvt", norm_groups=5)
    with pytest.raises(ConfigError, match="window_size"):
        tiny_fpn("swin", window_size=None)


def test_no_weight_decay_names_exist_in_the_model() -> None:
    model = create_model(tiny_fpn("pvt", head="cls"))
    exempt = model.no_weight_decay()
    names = {n for n, _ in model.named_parameters()}
    assert "backbone.cls_token" in exempt and exempt <= names
    assert any(".absolute." in n for n in exempt)
    assert isinstance(model, SemanticFPN)


@pytest.mark.parametrize("backbone", ["pvt", "swin"])
def test_bf16_autocast_on_cpu_runs_forward_and_backward(backbone: str, one_thread) -> None:
    model = create_model(tiny_fpn(backbone, conditional="peg@0"))
    x, masks = torch.randn(2, 3, 32, 48), torch.randint(0, 3, (2, 32, 48))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(x)
    assert logits.dtype == torch.bfloat16 and logits.shape == (2, 3, 32, 48)
    loss = F.cross_entropy(logits.float(), masks)
    loss.backward()
    assert torch.isfinite(loss) and all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    model.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        low = model(x).float()
    with torch.no_grad():
        full = model(x)
    assert (low - full).abs().max() < 0.05 * full.abs().max() + 0.05
