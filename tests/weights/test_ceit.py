"""CeiT checkpoints (coeusguo/ceit) give the released forward pass in vitpos's CeiT host."""

from . import layouts, reference
from .conftest import assert_close, images, load_float64, save_pth

SMALL = dict(embed_dim=16, depth=2, num_heads=2, patch_size=2, stem_channels=8, img_size=32, num_classes=5)


def test_ceit_checkpoint_equals_released_forward(tmp_path):
    # 32 px: conv (stride 2) 16, max-pool 8, 2x2 patches: a 4x4 grid
    sd = layouts.ceit(layouts.Filler(seed=61), dim=16, depth=2, patch=2, grid=4, classes=5)
    model = load_float64("ceit_tiny", save_pth(sd, tmp_path / "ceit.pth"), **SMALL)
    x = images(32)
    assert_close(model(x), reference.ceit(sd, x, heads=2))


def test_keep_grid_reads_the_stem_stride(tmp_path):
    sd = layouts.ceit(layouts.Filler(seed=62), dim=16, depth=2, patch=2, grid=4, classes=5)
    model = load_float64("ceit_tiny", save_pth(sd, tmp_path / "ceit.pth"), keep_grid=True, **{**SMALL, "img_size": 64})
    assert model.cfg.img_size == 32
    x = images(32)
    assert_close(model(x), reference.ceit(sd, x, heads=2))
