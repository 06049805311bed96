"""DeiT's distilled checkpoints (dist_token, head_dist) load and give the released forward pass."""

import pytest
import torch

import vitpos
from vitpos.engine.distillation import Distiller

from . import layouts, reference
from .conftest import assert_close, images, load_float64, save_pth

SMALL = dict(embed_dim=32, depth=2, num_heads=4, patch_size=4, img_size=16, num_classes=7)


def state(seed: int) -> dict:
    return layouts.deit_distilled(layouts.Filler(seed), dim=32, depth=2, patch=4, grid=4, classes=7)


def test_distilled_deit_equals_released_forward_at_inference(tmp_path):
    sd = state(41)
    model = load_float64("deit_tiny_distilled_patch16_224", save_pth(sd, tmp_path / "d.pth"), **SMALL)
    x = images(16)
    assert_close(model(x), reference.deit_distilled(sd, x, heads=4))


def test_both_heads_equal_the_released_training_outputs(tmp_path):
    sd = state(42)
    model = load_float64("deit_tiny_distilled_patch16_224", save_pth(sd, tmp_path / "d.pth"), **SMALL)
    x = images(16)
    logits, dist_logits = reference.deit_distilled(sd, x, heads=4, training=True)
    assert_close(model.distilled_logits(model.forward_tokens(x))[0], logits)
    teacher = vitpos.create_model("deit_tiny_patch16_224", **SMALL).double()
    outputs = Distiller(model, teacher)(x)  # eval mode: no dropout, so the released training pass
    assert_close(outputs.logits, logits)
    assert_close(outputs.dist_logits, dist_logits)


def test_the_stored_grid_is_read_past_both_prefix_rows(tmp_path):
    sd = state(43)
    model = load_float64("deit_tiny_distilled_patch16_224", save_pth(sd, tmp_path / "d.pth"), keep_grid=True, **SMALL)
    assert model.cfg.img_size == 16 and model.stages[0].absolute.prefix_table.shape == (1, 2, 32)
    torch.testing.assert_close(model.stages[0].absolute.prefix_table, sd["pos_embed"][:, :2])


def test_a_distilled_checkpoint_in_a_plain_deit_names_the_distilled_presets(tmp_path):
    path = save_pth(state(44), tmp_path / "d.pth")
    with pytest.raises(vitpos.CheckpointError, match=r"distilled=True \(deit_\*_distilled_\*\)"):
        vitpos.create_model("deit_tiny_patch16_224", checkpoint=path, **SMALL)
