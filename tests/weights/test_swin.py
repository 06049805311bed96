"""Microsoft's and timm's Swin checkpoints give the released forward pass in vitpos's Swin."""

import pytest
import torch
import torch.nn.functional as F

from . import layouts, reference
from .conftest import assert_close, images, load_float64, save_pth

DIMS, DEPTHS, HEADS = (8, 16), (2, 2), (2, 2)
SMALL = dict(
    embed_dims=DIMS,
    depths=DEPTHS,
    num_heads=HEADS,
    mlp_ratios=(4.0, 4.0),
    window_size=4,
    patch_size=2,
    img_size=16,
    num_classes=5,
)


@pytest.mark.parametrize("style", ["microsoft", "timm"])
def test_swin_checkpoint_equals_released_forward(tmp_path, style):
    # grids 8 (shifted windows of 4, masked) and 4 (one window, no shift)
    sd = layouts.swin(layouts.Filler(seed=21), DIMS, DEPTHS, HEADS, window=4, patch=2, img=16, classes=5, style=style)
    model = load_float64("swin_tiny", save_pth(sd, tmp_path / f"{style}.pth"), **SMALL)
    x = images(16)
    assert_close(model(x), reference.swin(sd, x, DEPTHS, HEADS, window=4, style=style))


def test_a_stage_smaller_than_the_window_keeps_swins_reduced_window(tmp_path):
    # grids 8, 4, 2 with window 4: the last stage attends in one 2x2 window with a 3x3-offset table
    dims, depths, heads = (8, 16, 24), (2, 2, 2), (2, 2, 3)
    sd = layouts.swin(layouts.Filler(seed=24), dims, depths, heads, window=4, patch=2, img=16, classes=5)
    assert sd["layers.2.blocks.0.attn.relative_position_bias_table"].shape == (9, 3)
    options = {**SMALL, "embed_dims": dims, "depths": depths, "num_heads": heads, "mlp_ratios": (4.0, 4.0, 4.0)}
    model = load_float64("swin_tiny", save_pth(sd, tmp_path / "three.pth"), **options)
    x = images(16)
    assert_close(model(x), reference.swin(sd, x, depths, heads, window=4, style="microsoft"))


def test_bias_tables_are_resampled_to_another_window(tmp_path):
    sd = layouts.swin(layouts.Filler(seed=22), DIMS, DEPTHS, HEADS, window=4, patch=2, img=16, classes=5)
    model = load_float64("swin_tiny", save_pth(sd, tmp_path / "w4.pth"), resize="model", **{**SMALL, "window_size": 2})
    stored = sd["layers.0.blocks.1.attn.relative_position_bias_table"]  # 49, heads
    expected = F.interpolate(stored.T.reshape(1, 2, 7, 7), size=(3, 3), mode="bicubic", align_corners=False).reshape(
        2, 9
    )
    torch.testing.assert_close(model.stages[0].blocks[1].attn.relative.table.double(), expected, rtol=1e-6, atol=1e-7)


def test_keep_grid_builds_the_stored_window(tmp_path):
    sd = layouts.swin(layouts.Filler(seed=23), DIMS, DEPTHS, HEADS, window=4, patch=2, img=16, classes=5)
    model = load_float64("swin_tiny", save_pth(sd, tmp_path / "w4.pth"), keep_grid=True, **{**SMALL, "window_size": 2})
    assert model.cfg.window_size == 4


@pytest.mark.parametrize("window", [6, 3])
def test_bias_tables_are_resized_geometrically_as_timm_does_by_default(tmp_path, window):
    sd = layouts.swin(layouts.Filler(seed=25), DIMS, DEPTHS, HEADS, window=4, patch=2, img=16, classes=5)
    path = save_pth(sd, tmp_path / "w4.pth")
    model = load_float64("swin_tiny", path, **{**SMALL, "img_size": 48 if window == 6 else 12, "window_size": window})
    bicubic = load_float64(
        "swin_tiny", path, resize="model", **{**SMALL, "img_size": 48 if window == 6 else 12, "window_size": window}
    )
    stored = sd["layers.0.blocks.1.attn.relative_position_bias_table"]  # 49, heads
    expected = reference.timm_resize_bias_table(stored, window).T  # heads, (2W-1)^2
    ours = model.stages[0].blocks[1].attn.relative.table
    torch.testing.assert_close(ours, expected, rtol=1e-12, atol=1e-12)
    assert not torch.allclose(bicubic.stages[0].blocks[1].attn.relative.table, ours, atol=1e-3)
