"""T2T-ViT checkpoints (performer and transformer stems) give the released forward pass in vitpos's T2T host."""

import argparse

import pytest
import torch

import vitpos
from vitpos.cli import main

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


def test_load_weights_into_a_model_without_the_released_table_names_that_option(tmp_path):
    sd = layouts.t2t_vit(layouts.Filler(seed=54), dim=16, depth=1, token_dim=8, tokens=4, classes=5, layer="performer")
    model = vitpos.create_model("t2t_vit_7", **{**SMALL, "depth": 1})
    with pytest.raises(vitpos.CheckpointError, match=r"t2t\.pth .*lacks: absolute='sincos1d:prefix'; build it") as err:
        vitpos.load_weights(model, save_pth(sd, tmp_path / "t2t.pth"))
    assert "relative=" not in str(err.value) and "join=" not in str(err.value)


def _timm_training_checkpoint(path, sd: dict, ema: dict):
    # what T2T-ViT's main.py saves through timm's CheckpointSaver (model EMA on by default)
    args = argparse.Namespace(model="t2t_vit_7", model_ema=True, model_ema_decay=0.99996, img_size=32)
    saved = {"epoch": 309, "arch": "t2t_vit_7", "state_dict": sd, "optimizer": {}, "args": args, "version": 2}
    torch.save({**saved, "state_dict_ema": ema, "metric": 71.7}, path)
    return path


def test_a_training_checkpoint_gives_its_ema_weights_as_t2t_evaluates_them(tmp_path, caplog, capsys):
    sd = layouts.t2t_vit(layouts.Filler(seed=55), dim=16, depth=1, token_dim=8, tokens=4, classes=5, layer="performer")
    ema = layouts.t2t_vit(layouts.Filler(seed=56), dim=16, depth=1, token_dim=8, tokens=4, classes=5, layer="performer")
    path = _timm_training_checkpoint(tmp_path / "checkpoint.pth.tar", sd, ema)
    small = {**SMALL, "depth": 1}
    with caplog.at_level("INFO", logger="vitpos.weights"):
        model = load_float64("t2t_vit_7", path, **small)
    assert "its EMA weights (entry 'state_dict_ema')" in caplog.text and "entry=state_dict takes" in caplog.text
    x = images(32)
    assert_close(model(x), reference.t2t_vit(ema, x, heads=2))
    others = vitpos.create_model("t2t_vit_7", checkpoint=path, entry="state_dict", **small).double()
    vitpos.load_weights(others, path, entry="state_dict")
    assert_close(others.eval()(x), reference.t2t_vit(sd, x, heads=2))
    flags = ["--model=t2t_vit_7", "--embed-dim=16", "--depth=1", "--num-heads=2", "--token-dim=8", "--img-size=32"]
    assert main(["convert", str(path), str(tmp_path / "out"), *flags, "--num-classes=5"]) == 0
    out = capsys.readouterr().out
    assert "(t2t layout) ->" in out and out.rstrip().endswith("parameters; weights from its entry 'state_dict_ema'")
