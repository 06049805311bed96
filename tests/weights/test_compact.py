"""Compact Transformers' checkpoints (ViT-Lite, CVT, CCT) give the released forward pass in vitpos's compact host."""

from pathlib import Path

import pytest
import torch

import vitpos
from vitpos.cli import main
from vitpos.weights import detect_layout, guess_preset
from vitpos.weights.files import WeightsFile

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


def test_cct_cifar100_checkpoint_is_found_and_loads_with_its_class_count(tmp_path, caplog):
    # the authors' CCT-7/3x1 on CIFAR-100: the class count is read from classifier.fc.weight
    state = layouts.compact(layouts.Filler(meta=True), dim=256, depth=7, classes=100, tokens=256, conv=(3,))
    assert guess_preset(WeightsFile(Path("cct100.pth"), state), detect_layout(state, "cct100.pth")) == "cct_7_3x1"
    sd = layouts.compact(layouts.Filler(seed=36), dim=16, depth=2, classes=100, tokens=64, conv=(3,))
    with caplog.at_level("INFO", logger="vitpos.weights"):
        model = load_float64("cct_7_3x1", save_pth(sd, tmp_path / "cct100.pth"), **{**SMALL, "num_classes": 100})
    assert "re-initialised" not in caplog.text
    x = images(16)
    assert_close(model(x), reference.compact(sd, x, heads=2, conv=(3,)))


def test_a_found_preset_is_built_with_the_class_count_it_was_found_with(tmp_path):
    full = layouts.compact(layouts.Filler(seed=38), dim=256, depth=7, classes=100, tokens=256, conv=(3,))
    path = save_pth({k: v.float() for k, v in full.items()}, tmp_path / "cct100.pth")
    found = vitpos.create_model(None, checkpoint=path)
    assert found.cfg.num_classes == 100 and torch.equal(found.head.weight, full["classifier.fc.weight"].float())
    assert main(["convert", str(path), str(tmp_path / "out")]) == 0
    assert torch.equal(vitpos.create_model(None, checkpoint=tmp_path / "out").head.weight, found.head.weight)


def test_a_classifier_of_another_size_names_the_count_that_loads_it(tmp_path, capsys):
    sd = layouts.compact(layouts.Filler(seed=37), dim=16, depth=1, classes=100, tokens=256, conv=(3,))
    src = save_pth({k: v.float() for k, v in sd.items()}, tmp_path / "cct100.pth")
    flags = ["--model=cct_7_3x1", "--embed-dim=16", "--depth=1", "--num-heads=2"]
    assert main(["convert", str(src), str(tmp_path / "out"), *flags]) == 2
    err = capsys.readouterr().err
    assert "cct100.pth (compact layout)" in err
    assert "pass --num-classes 100 to load the checkpoint's 100-class classifier, or --num-classes N to re-init" in err
    assert not (tmp_path / "out").exists()
    assert main(["convert", str(src), str(tmp_path / "out"), *flags, "--num-classes=100"]) == 0
    converted = vitpos.create_model(None, checkpoint=tmp_path / "out")
    assert torch.equal(converted.head.weight, sd["classifier.fc.weight"].float())
