"""Loading at another resolution: timm's resampling for timm-layout files by default, the model's
run-time resampling as an option (and for PVT)."""

import pytest
import torch

import vitpos

from . import layouts, reference
from .conftest import images, save_pth


def test_vit_224_checkpoint_in_a_384_model_equals_run_time_resampling(tmp_path):
    sd = layouts.timm_vit(layouts.Filler(41), dim=16, depth=1, patch=16, grid=14, classes=5)
    path = save_pth({k: v.float() for k, v in sd.items()}, tmp_path / "deit224.pth")  # released weights are float32
    size = dict(embed_dim=16, depth=1, num_heads=2, num_classes=5)
    at_384 = vitpos.create_model("deit_tiny_patch16_224", checkpoint=path, img_size=384, resize="model", **size).eval()
    at_224 = vitpos.create_model("deit_tiny_patch16_224", checkpoint=path, **size).eval()
    kept = vitpos.create_model("deit_tiny_patch16_224", checkpoint=path, img_size=384, keep_grid=True, **size).eval()
    assert at_384.stages[0].absolute.table.shape == (1, 24 * 24, 16) and kept.cfg.img_size == 224
    x = images(384, batch=1).float()
    with torch.no_grad():
        reference = at_224(x)
        torch.testing.assert_close(at_384(x), reference, rtol=0, atol=0)
        torch.testing.assert_close(kept(x), reference, rtol=0, atol=0)
    assert not torch.equal(
        at_384.stages[0].absolute.table[:, :196], at_224.stages[0].absolute.table
    )  # the table was resampled


def test_pvt_checkpoint_in_a_larger_model_equals_run_time_resampling(tmp_path):
    dims, depths, heads, sr = (8, 16), (1, 1), (1, 2), (2, 1)
    sd = layouts.pvt(layouts.Filler(42), dims, depths, heads, (2.0, 2.0), sr, patch=4, img=32, classes=5)
    path = save_pth({k: v.float() for k, v in sd.items()}, tmp_path / "pvt.pth")
    size = dict(embed_dims=dims, depths=depths, num_heads=heads, mlp_ratios=(2.0, 2.0), sr_ratios=sr, num_classes=5)
    large = vitpos.create_model("pvt_tiny", checkpoint=path, img_size=48, **size).eval()
    small = vitpos.create_model("pvt_tiny", checkpoint=path, img_size=32, **size).eval()
    x = images(48, batch=1).float()
    with torch.no_grad():
        torch.testing.assert_close(large(x), small(x), rtol=0, atol=0)


@pytest.mark.parametrize("side", [24, 10])
def test_vit_pos_embed_is_resampled_with_antialias_as_timm_does_by_default(tmp_path, side):
    sd = layouts.timm_vit(layouts.Filler(43), dim=16, depth=1, patch=16, grid=14, classes=5)
    path = save_pth({k: v.float() for k, v in sd.items()}, tmp_path / "deit224.pth")
    size = dict(embed_dim=16, depth=1, num_heads=2, num_classes=5, img_size=16 * side)
    timm_like = vitpos.create_model("deit_tiny_patch16_224", checkpoint=path, **size).eval()
    run_time = vitpos.create_model("deit_tiny_patch16_224", checkpoint=path, resize="model", **size).eval()
    expected = reference.timm_resample_pos_embed(sd["pos_embed"].float(), side, num_prefix_tokens=1)
    absolute = timm_like.stages[0].absolute
    torch.testing.assert_close(absolute.prefix_table, expected[:, :1], rtol=0, atol=0)
    torch.testing.assert_close(absolute.table, expected[:, 1:], rtol=0, atol=0)
    x = images(16 * side, batch=1).float()
    with torch.no_grad():
        assert not torch.allclose(timm_like(x), run_time(x), rtol=1e-4, atol=1e-5)  # the two resamplings differ


def test_unknown_resize_is_a_clear_error(tmp_path):
    sd = layouts.timm_vit(layouts.Filler(44), dim=16, depth=1, patch=16, grid=14, classes=5)
    path = save_pth(sd, tmp_path / "deit224.pth")
    with pytest.raises(vitpos.CheckpointError, match="unknown resize 'bilinear'; valid values: timm, model"):
        vitpos.create_model(
            "deit_tiny_patch16_224", checkpoint=path, resize="bilinear", embed_dim=16, depth=1, num_heads=2
        )
