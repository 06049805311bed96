"""The Compact, T2T, CeiT and distilled hosts under export (one graph for every size), autocast and compile."""

import pytest
import torch

import vitpos
from vitpos.deploy import ExportRange

from ..test_deploy import check_program, randomised

CASES = {
    "cct_7_3x1_lape": (dict(embed_dim=16, depth=2, num_heads=2, img_size=16), ExportRange(8, 32, 2)),
    "cvt_7_4": (dict(embed_dim=16, depth=1, num_heads=2, img_size=16, conditional="peg@0"), ExportRange(8, 32, 4)),
    "t2t_vit_7_lape": (dict(embed_dim=16, depth=3, num_heads=2, token_dim=8, img_size=32), ExportRange(32, 64, 16)),
    "ceit_tiny_lape": (
        dict(embed_dim=16, depth=2, num_heads=2, patch_size=2, stem_channels=8, img_size=32),
        ExportRange(16, 48, 8),
    ),
    "deit_tiny_distilled_patch16_224": (dict(embed_dim=16, depth=1, num_heads=2, img_size=32), ExportRange(16, 48, 16)),
}


SLOW = {"t2t_vit_7_lape", "cct_7_3x1_lape", "ceit_tiny_lape"}  # 10-16 s each on one core


@pytest.mark.parametrize(
    "name", [pytest.param(name, marks=pytest.mark.slow) if name in SLOW else name for name in sorted(CASES)]
)
def test_program_equals_eager_at_every_size(name, one_thread):
    options, span = CASES[name]
    model = randomised(vitpos.create_model(name, **options, num_classes=3))
    sizes = [(span.min_size, span.max_size), (span.max_size, span.min_size), (span.min_size, span.min_size)]
    check_program(model, span, sizes)


@pytest.mark.parametrize("name", sorted(CASES))
def test_bf16_autocast_follows_float32(name, one_thread):
    options, span = CASES[name]
    model = randomised(vitpos.create_model(name, **options, num_classes=3))
    x = torch.randn(2, 3, span.max_size, span.min_size)
    with torch.no_grad():
        full = model(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = model(x)
    assert low.dtype == torch.bfloat16 and torch.isfinite(low).all()
    torch.testing.assert_close(low.float(), full, rtol=0.1, atol=0.1)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cct_7_3x1_lape", "ceit_tiny_lape"])
def test_compiled_model_equals_eager(name, one_thread):
    options, span = CASES[name]
    model = randomised(vitpos.create_model(name, **options, num_classes=3))
    x = torch.randn(2, 3, span.max_size, span.min_size)
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(model)(x), model(x), rtol=1e-4, atol=1e-4)
