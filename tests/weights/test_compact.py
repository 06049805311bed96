"""Compact Transformers' checkpoints (ViT-Lite, CVT, CCT) give the released forward pass in vitpos's compact host."""

import pytest

from . import layouts, reference
from .conftest import assert_close, images, load_float64, save_pth

SMALL = dict(embed_dim=16, depth=2, num_heads=2, img_size=16, num_classes=5)


def test_cct_checkpoint_equals_released_forward(tmp_path):
    # one 3x3 convolution, ReLU, max-pool: a 16 px image gives an 8x8 grid
    sd = layouts.compact(layouts.Filler(seed=31), dim=16, depth=2, classes=5, tokens=64, conv=(3,))
    model = load_float64("cct_7_3x1", save_pth(sd, tmp_path / "cct.pth"), **SMALL)
    x = images(16)
    assert_close(model(x), reference.compact(sd, x, heads=2, conv=(3,)))


def test_two_layer_cct_tokenizer_equals_released_forward(tmp_path):
    # CCT-x/7x2 style: kernel 7 (stride 2, padding 3), two blocks: 32 -> 16 -> 8 -> 4 -> 2
    sd = layouts.compact(layouts.Filler(seed=32), dim=16, depth=2, classes=5, tokens=4, conv=(7, 7))
    options = {**SMALL, "img_size": 32, "conv_layers": 2, "conv_kernel": 7, "conv_channels": 16}
    model = load_float64("cct_7_3x1", save_pth(sd, tmp_path / "cct72.pth"), **options)
    x = images(32)
    assert_close(model(x), reference.compact(sd, x, heads=2, conv=(7, 7)))


def test_cvt_checkpoint_equals_released_forward(tmp_path):
    sd = layouts.compact(layouts.Filler(seed=33), dim=16, depth=2, classes=5, tokens=16, conv=None)
    model = load_float64("cvt_7_4", save_pth(sd, tmp_path / "cvt.pth"), **SMALL)
    x = images(16)
    assert_close(model(x), reference.compact(sd, x, heads=2, conv=None))


def test_vit_lite_checkpoint_equals_released_forward(tmp_path):
    sd = layouts.compact_vit_lite(layouts.Filler(seed=34), dim=16, depth=2, classes=5, grid=4)
    model = load_float64("vit_lite_7_4_compact", save_pth(sd, tmp_path / "vitlite.pth"), **SMALL)
    x = images(16)
    assert_close(model(x), reference.compact(sd, x, heads=2, conv=None))


@pytest.mark.parametrize("stored", [32, 24])
def test_the_stored_grid_sets_the_image_size_and_other_sizes_resample(tmp_path, stored):
    sd = layouts.compact(layouts.Filler(seed=35), dim=16, depth=1, classes=5, tokens=(stored // 2) ** 2, conv=(3,))
    model = load_float64("cct_7_3x1", save_pth(sd, tmp_path / "cct.pth"), **{**SMALL, "depth": 1, "img_size": 32})
    assert model.stages[0].absolute.table.shape == (1, 256, 16)
    if stored == 32:
        x = images(32)
        assert_close(model(x), reference.compact(sd, x, heads=2, conv=(3,)))
