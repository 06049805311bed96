"""The LaPE authors' ViT (pe_norm per block, chained) loads into ``lape:chained``."""

from . import layouts, reference
from .conftest import assert_close, images, load_float64, save_pth

SMALL = dict(embed_dim=32, depth=3, num_heads=4, patch_size=4, img_size=16, num_classes=5)


def test_lape_checkpoint_equals_the_authors_forward(tmp_path):
    fill = layouts.Filler(seed=11)
    sd = layouts.lape_norms(layouts.timm_vit(fill, dim=32, depth=3, patch=4, grid=4, classes=5), fill, depth=3, dim=32)
    model = load_float64("deit_tiny_patch16_224", save_pth(sd, tmp_path / "lape.pth"), **SMALL)
    assert model.cfg.position.join == "lape:chained"
    x = images(16)
    assert_close(model(x), reference.vit(sd, x, heads=4, lape=True))


def test_the_lape_preset_keeps_its_options_and_is_chained_on_load(tmp_path):
    fill = layouts.Filler(seed=12)
    sd = layouts.lape_norms(layouts.timm_vit(fill, dim=32, depth=3, patch=4, grid=4, classes=5), fill, depth=3, dim=32)
    model = load_float64("deit_tiny_patch16_224_lape", save_pth(sd, tmp_path / "lape.pth"), **SMALL)
    assert model.cfg.position.join == "lape:chained"
    x = images(16, seed=2)
    assert_close(model(x), reference.vit(sd, x, heads=4, lape=True))
