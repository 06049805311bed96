"""PVT v1 checkpoints (whai362/PVT) give the released forward pass in vitpos's PVT."""

from . import layouts, reference
from .conftest import assert_close, images, load_float64, save_pth

DIMS, DEPTHS, HEADS, SR = (8, 16), (1, 2), (1, 2), (2, 1)
SMALL = dict(
    embed_dims=DIMS, depths=DEPTHS, num_heads=HEADS, mlp_ratios=(2.0, 2.0), sr_ratios=SR, img_size=32, num_classes=5
)


def pvt_state(seed: int = 31) -> dict:
    return layouts.pvt(layouts.Filler(seed), DIMS, DEPTHS, HEADS, (2.0, 2.0), SR, patch=4, img=32, classes=5)


def test_pvt_checkpoint_equals_released_forward(tmp_path):
    sd = pvt_state()
    model = load_float64("pvt_tiny", save_pth(sd, tmp_path / "pvt.pth"), **SMALL)
    x = images(32)
    assert_close(model(x), reference.pvt(sd, x, HEADS, SR))
