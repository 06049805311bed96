"""T2T-ViT checkpoints (performer and transformer stems) give the released forward pass in vitpos's T2T host."""

import pytest
import torch

import vitpos

from . import layouts, reference
from .conftest import assert_close, images, load_float64, save_pth

SMALL = dict(embed_dim=16, depth=2, num_heads=2, token_dim=8, img_size=32, num_classes=5)


@pytest.mark.parametrize("layer", ["performer", "transformer"])
def test_t2t_checkpoint_equals_released_forward(tmp_path, layer):
    # 32 px: soft splits 8x8, 4x4, 2x2
    sd = layouts.t2t_vit(layouts.Filler(seed=51), dim=16, depth=2, token_dim=8, tokens=4, classes=5, layer=layer)
    model = load_float64("t2t_vit_7", save_pth(sd, tmp_path / "t2t.pth"), t2t_layer=layer, **SMALL)
    assert model.cfg.position.absolute == "sincos1d:prefix"  # the released table counts the class token
    x = images(32)
    assert_close(model(x), reference.t2t_vit(sd, x, heads=2))


def test_t2t_at_another_size_equals_released_forward(tmp_path):
    # 64 px: the fixed table is recomputed for 4x4 tokens, the random features are the checkpoint's
    sd = layouts.t2t_vit(layouts.Filler(seed=52), dim=16, depth=1, token_dim=8, tokens=4, classes=5, layer="performer")
    model = load_float64("t2t_vit_7", save_pth(sd, tmp_path / "t2t.pth"), **{**SMALL, "depth": 1})
    torch.testing.assert_close(model.downsamples[0].attention1.features, sd["tokens_to_token.attention1.w"])
    x = images(64)
    assert_close(model(x), reference.t2t_vit(sd, x, heads=2))


def test_a_t2t_checkpoint_needs_the_t2t_host(tmp_path):
    sd = layouts.t2t_vit(layouts.Filler(seed=53), dim=16, depth=1, token_dim=8, tokens=4, classes=5, layer="performer")
    with pytest.raises(vitpos.CheckpointError, match="t2t"):
        vitpos.create_model("deit_tiny_patch16_224", checkpoint=save_pth(sd, tmp_path / "t2t.pth"))
