"""The LaPE authors' ViT (pe_norm per block, chained) loads into ``lape:chained``; their training
checkpoints (with an ``args`` Namespace) load, and ``join_type='share'`` is read from it."""

import argparse

import pytest
import torch

import vitpos

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


def _training_checkpoint(path, sd: dict, join_type: str):
    # what the LaPE (and DeiT, iRPE) main.py saves: the weights beside the training state and its arguments
    args = argparse.Namespace(model="deit_tiny_patch16_224", lr=5e-4, join_type=join_type, input_size=16)
    torch.save({"model": sd, "optimizer": {}, "epoch": 299, "args": args}, path)
    return path


def test_a_training_checkpoint_with_its_args_namespace_loads(tmp_path):
    fill = layouts.Filler(seed=13)
    sd = layouts.lape_norms(layouts.timm_vit(fill, dim=32, depth=3, patch=4, grid=4, classes=5), fill, depth=3, dim=32)
    model = load_float64("deit_tiny_patch16_224", _training_checkpoint(tmp_path / "lape.pth", sd, "LaPE"), **SMALL)
    x = images(16, seed=3)
    assert_close(model(x), reference.vit(sd, x, heads=4, lape=True))


def test_join_type_share_is_read_from_the_args_and_selects_the_shared_join(tmp_path):
    sd = layouts.timm_vit(layouts.Filler(seed=14), dim=32, depth=3, patch=4, grid=4, classes=5)  # plain DeiT keys
    path = _training_checkpoint(tmp_path / "share.pth", sd, "share")
    model = load_float64("deit_tiny_patch16_224", path, **SMALL)
    assert model.cfg.position.join == "shared"
    x = images(16, seed=4)
    assert_close(model(x), reference.vit(sd, x, heads=4, share=True))
    plain = vitpos.create_model("deit_tiny_patch16_224", **SMALL)
    with pytest.raises(vitpos.CheckpointError, match=r"share\.pth .*join='shared'.*create_model"):
        vitpos.load_weights(plain, path)
