"""CPVT presets: Table 9 sizes, exact parameter counts, placement in the host, resolutions, invariance."""

import random

import pytest
import torch

import vitpos

DEIT_TINY_PARAMS = 5_717_416
SMALL = dict(embed_dim=32, num_heads=2, num_classes=7)
"""Reduced width (patch 16 kept) so whole-model tests stay fast."""


def count(name: str, **overrides) -> int:
    with torch.device("meta"):
        model = vitpos.create_model(name, **overrides)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(
    "name,width,heads,deit",
    [
        ("cpvt_ti", 192, 3, "deit_tiny_patch16_224"),
        ("cpvt_s", 384, 6, "deit_small_patch16_224"),
        ("cpvt_b", 768, 12, "deit_base_patch16_224"),
    ],
)
def test_presets_follow_table_9(name, width, heads, deit):
    base = vitpos.get_config(deit)
    for preset, placement, head in ((name, "peg@0", "cls"), (f"{name}_gap", "peg@0-5", "gap")):
        cfg = vitpos.get_config(preset)
        assert (cfg.embed_dim, cfg.num_heads, cfg.depth, cfg.patch_size, cfg.img_size) == (width, heads, 12, 16, 224)
        assert (cfg.mlp_ratio, cfg.qkv_bias) == (base.mlp_ratio, base.qkv_bias)
        assert (cfg.position.absolute, cfg.position.join, cfg.position.conditional) == ("none", "input", placement)
        assert cfg.head == head and cfg.class_token == (head == "cls")


def test_cpvt_ti_parameter_counts_from_deit_tiny():
    width, grid_cells = 192, 14 * 14
    learned_pe = (grid_cells + 1) * width  # the table and the class token's own vector
    peg = (9 + 1) * width
    assert count("cpvt_ti") == DEIT_TINY_PARAMS - learned_pe + peg  # 5,681,512
    class_token = width
    assert count("cpvt_ti_gap") == DEIT_TINY_PARAMS - learned_pe - class_token + 5 * peg  # 5,689,000


def test_table_16_count_is_one_peg_without_class_token():
    # Table 16 lists CPVT-Ti (PEG at position 0) with 5,681,320 parameters: exactly one
    # default PEG on DeiT-Ti without its position table and without the class token
    assert count("cpvt_ti", head="gap") == 5_681_320


def test_peg_runs_after_the_named_blocks():
    model = vitpos.create_model("cpvt_ti_gap", **SMALL, depth=4, conditional="peg@-1,0,2-4")
    calls: list[str] = []
    for i, block in enumerate(model.stages[0].blocks):
        block.register_forward_hook(lambda *_, i=i: calls.append(f"block{i}"))
    for key, peg in model.stages[0].conditional.generators.items():
        peg.register_forward_hook(lambda *_, key=key: calls.append(f"peg{key}"))
    model(torch.randn(1, 3, 64, 48))
    assert calls == ["peg-1", "block0", "peg0", "block1", "block2", "peg2", "block3", "peg3"]


@pytest.mark.parametrize("name,depth", [("cpvt_ti", 2), ("cpvt_ti_gap", 5)])
def test_model_built_for_224_runs_at_other_resolutions(name, depth):
    """PEGs hold no table of the training size: a model built for 224 is the one built for any other size."""
    model = vitpos.create_model(name, **SMALL, depth=depth).eval()
    with torch.no_grad():
        for size in (160, 384, 448, 512):
            x = torch.randn(1, 3, size, size)
            native = vitpos.create_model(name, **SMALL, depth=depth, img_size=size).eval()
            native.load_state_dict(model.state_dict())
            assert model(x).shape == (1, 7)
            torch.testing.assert_close(model(x), native(x))
        feats = model.forward_tokens(torch.randn(2, 3, 160, 256))  # non-square: grid 10x16
    assert feats.shape == (2, model.num_prefix_tokens + 160, 32)


def _logits_under_shifts(model, image, shifts, patch=16):
    with torch.no_grad():
        reference = model(image)
        moved = [model(torch.roll(image, (dy * patch, dx * patch), dims=(2, 3))) for dy, dx in shifts]
    return reference, moved


def test_circular_peg_with_gap_is_invariant_to_cyclic_shifts():
    rng = random.Random(0)
    shifts = [(rng.randrange(4), rng.randrange(6)) for _ in range(4)]
    image = torch.randn(2, 3, 64, 96, dtype=torch.float64)  # grid 4x6
    circular = vitpos.create_model("cpvt_ti_gap", **SMALL, depth=3, conditional="peg@-1-3:pad=circular")
    reference, moved = _logits_under_shifts(circular.double().eval(), image, shifts)
    for logits in moved:
        assert torch.allclose(logits, reference, atol=1e-10, rtol=0)
    # the same model with zero padding knows where things are, so shifts change its logits
    zeros = vitpos.create_model("cpvt_ti_gap", **SMALL, depth=3, conditional="peg@-1-3")
    reference, moved = _logits_under_shifts(zeros.double().eval(), image, shifts)
    assert max((logits - reference).abs().max().item() for logits in moved) > 1e-6


def test_peg_combines_with_a_learned_absolute_encoding():
    # Table 7, "PEG + LE": both position sources in one model, trained together
    model = vitpos.create_model("cpvt_ti", **SMALL, depth=2, absolute="learned")
    model(torch.randn(2, 3, 64, 80)).sum().backward()
    assert model.stages[0].absolute.table.grad is not None
    assert all(p.grad is not None for p in model.stages[0].conditional.parameters())
    assert "stages.0.conditional.generators.0.proj.0.weight" in model.no_weight_decay()
