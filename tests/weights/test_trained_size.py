"""A released file trained at 384 px loads with no options as a 384-px model (its table kept, not shrunk), equal
to the model built with img_size=384 and to the released forward in float64, and is recorded at 384 px, so eval
and the data config default to it. A head count the shapes do not show is said to be assumed."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch
import yaml

import vitpos
from vitpos.cli import main
from vitpos.weights import detect_layout, guess_model
from vitpos.weights.files import WeightsFile

from . import layouts, reference
from .conftest import assert_close, images, load_float64, save_pth

FILES = {
    "deit": (
        "deit_tiny_patch16_224",
        lambda fill: layouts.timm_vit(fill, dim=192, depth=12, patch=16, grid=24, classes=1000),
        lambda sd, x: reference.vit(sd, x, heads=3),
    ),
    "ceit": (
        "ceit_tiny",
        lambda fill: layouts.ceit(fill, dim=192, depth=12, patch=4, grid=24, classes=1000, stem=64),
        lambda sd, x: reference.ceit(sd, x, heads=3),
    ),
    "t2t": (
        "t2t_vit_7",
        lambda fill: layouts.t2t_vit(fill, dim=256, depth=7, token_dim=64, tokens=576, classes=1000, layer="performer"),
        lambda sd, x: reference.t2t_vit(sd, x, heads=4),
    ),
}
"""Release-shaped files at 384 px (a 24 x 24 grid) of presets trained at 224: the preset, the file, its forward."""


RELEASED_384 = {
    "deit_base_patch16_384": (
        "deit_base_patch16_224",
        lambda fill: layouts.timm_vit(fill, dim=768, depth=12, patch=16, grid=24, classes=1000),
    ),
    "ceit_tiny_384": (
        "ceit_tiny",
        lambda fill: layouts.ceit(fill, dim=192, depth=12, patch=4, grid=24, classes=1000, stem=64),
    ),
    "t2t_vit_14_384": (
        "t2t_vit_7",
        lambda fill: layouts.t2t_vit(
            fill, dim=384, depth=14, token_dim=64, tokens=576, classes=1000, layer="performer", mlp=3
        ),
    ),
}
"""The released 384-px files' shapes (DeiT-B/16 384, CeiT-T 384, T2T-ViT-14@384) and the preset each is found as."""


@pytest.mark.parametrize("released", RELEASED_384)
def test_a_released_384_file_is_found_with_its_grid(released):
    name, make = RELEASED_384[released]
    state = make(layouts.Filler(meta=True))
    file = WeightsFile(Path(f"{released}.pth"), state)
    found, fields = guess_model(file, detect_layout(state, file.path))
    assert found == name and fields["img_size"] == 384


@pytest.mark.slow
@pytest.mark.parametrize("kind", FILES)
def test_a_384_file_loads_as_a_384_model_with_no_options(kind, tmp_path):
    name, make, forward = FILES[kind]
    sd = make(layouts.Filler(seed=len(kind)))
    path = save_pth(sd, tmp_path / f"{kind}_384.pth")
    guessed = load_float64(None, path)
    built = load_float64(name, path, img_size=384)
    assert guessed.cfg == built.cfg and guessed.cfg.img_size == 384
    assert all(torch.equal(v, built.state_dict()[k]) for k, v in guessed.state_dict().items())
    x = images(384, batch=1)
    out = guessed(x)
    assert torch.equal(out, built(x))
    assert_close(out, forward(sd, x))


def test_convert_records_the_trained_size_for_eval_and_the_data_config(tmp_path, capsys):
    sd = layouts.t2t_vit(layouts.Filler(4), dim=256, depth=7, token_dim=64, tokens=576, classes=1000, layer="performer")
    path = save_pth({k: v.float() for k, v in sd.items()}, tmp_path / "t2t_384.pth")
    assert main(["convert", str(path), str(tmp_path / "out")]) == 0
    assert "fits preset t2t_vit_7 with img_size=384 (read from the file)" in capsys.readouterr().out
    config = yaml.safe_load((tmp_path / "out" / "config.yaml").read_text())
    assert config["model"]["img_size"] == 384
    _, saved = vitpos.load_model(tmp_path / "out")
    assert saved.model_config.img_size == 384 and tuple(saved.data_config.input_size) == (3, 384, 384)
    assert json.loads(json.dumps(saved.data_config.to_dict()))["input_size"] == [3, 384, 384]


def test_an_assumed_head_count_is_said_and_a_given_one_is_used(tmp_path, caplog, capsys):
    # T2T-ViT-14-resnext's shapes are T2T-ViT-14's: only the head count (32, not 6) differs
    sd = layouts.t2t_vit(
        layouts.Filler(5), dim=128, depth=2, token_dim=8, tokens=4, classes=7, layer="transformer", mlp=3
    )
    path = save_pth(sd, tmp_path / "resnext.pth")
    x = images(32)
    with caplog.at_level(logging.WARNING, logger="vitpos.weights"):
        assumed = load_float64(None, path)
    assert assumed.cfg.num_heads == 2 and "num_heads=2 is assumed, not read from its shapes" in caplog.text
    caplog.clear()
    given = load_float64(None, path, num_heads=32)
    assert given.cfg.num_heads == 32 and "assumed" not in caplog.text
    assert_close(given(x), reference.t2t_vit(sd, x, heads=32))
    assert main(["convert", str(path), str(tmp_path / "out"), "--num-heads", "32"]) == 0
    out = capsys.readouterr().out
    assert "num_heads=2 assumed" not in out and "num_heads" not in out.split("->")[0]
