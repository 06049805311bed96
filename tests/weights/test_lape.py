"""The LaPE authors' ViT (pe_norm per block) loads into ``lape:chained``, or ``lape`` where a training
checkpoint's stored ``args`` name the first releases' ``--pe_joining``; ``join_type='share'`` is read
from the ``args`` too; a join asked for is kept or refused; ``--pe 1D_sin`` tables load."""

import argparse

import pytest
import torch

import vitpos
from vitpos.cli import main

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


def _first_release(path, sd: dict, pe: str = "learnable"):
    # what main.py of the LaPE repository's first releases saves: --pe_joining instead of --join-type
    args = argparse.Namespace(model="deit_tiny_patch16_224", pe=pe, pe_joining="LaPE", input_size=16)
    torch.save({"model": sd, "optimizer": {}, "epoch": 299, "args": args}, path)
    return path


def _lape_state(seed: int) -> dict:
    fill = layouts.Filler(seed=seed)
    return layouts.lape_norms(
        layouts.timm_vit(fill, dim=32, depth=3, patch=4, grid=4, classes=5), fill, depth=3, dim=32
    )


def test_a_first_release_checkpoint_normalises_the_same_pe_in_every_layer(tmp_path):
    sd = _lape_state(15)
    model = load_float64("deit_tiny_patch16_224", _first_release(tmp_path / "first.pth", sd), **SMALL)
    assert model.cfg.position.join == "lape"
    x = images(16, seed=5)
    unchained = reference.vit(sd, x, heads=4, lape=True, chained=False)
    assert_close(model(x), unchained)
    assert (unchained - reference.vit(sd, x, heads=4, lape=True)).abs().max() > 1e-3  # the two forms differ


@pytest.mark.parametrize("name", ["deit_tiny_patch16_224", "deit_tiny_patch16_224_lape"])
def test_join_lape_asked_for_is_kept_for_a_first_release_file(tmp_path, name):
    sd = _lape_state(16)
    model = load_float64(name, _first_release(tmp_path / "first.pth", sd), join="lape", **SMALL)
    assert model.cfg.position.join == "lape"
    x = images(16, seed=6)
    assert_close(model(x), reference.vit(sd, x, heads=4, lape=True, chained=False))


def test_load_weights_of_a_first_release_file_into_a_lape_model(tmp_path):
    sd = _lape_state(17)
    path = _first_release(tmp_path / "first.pth", sd)
    model = vitpos.create_model("deit_tiny_patch16_224_lape", **SMALL).double().eval()
    vitpos.load_weights(model, path)
    x = images(16, seed=7)
    assert_close(model(x), reference.vit(sd, x, heads=4, lape=True, chained=False))
    chained = vitpos.create_model("deit_tiny_patch16_224", join="lape:chained", **SMALL)
    with pytest.raises(vitpos.CheckpointError, match=r"first\.pth .*lacks: join='lape';"):
        vitpos.load_weights(chained, path)


def test_a_join_the_file_contradicts_is_refused_naming_the_one_it_needs(tmp_path):
    first = _first_release(tmp_path / "first.pth", _lape_state(18))
    with pytest.raises(
        vitpos.CheckpointError, match=r"first\.pth .*'lape' \(its stored training arguments.*join=lape "
    ):
        vitpos.create_model("deit_tiny_patch16_224", checkpoint=first, join="lape:chained", **SMALL)
    current = _training_checkpoint(tmp_path / "current.pth", _lape_state(18), "LaPE")
    with pytest.raises(vitpos.CheckpointError, match=r"current\.pth .*not 'lape': give join=lape:chained or leave"):
        vitpos.create_model("deit_tiny_patch16_224", checkpoint=current, join="lape", **SMALL)


def test_a_bare_file_keeps_the_join_asked_for_and_load_weights_says_how(tmp_path, caplog):
    sd = _lape_state(19)
    path = save_pth(sd, tmp_path / "bare.pth")
    with caplog.at_level("INFO", logger="vitpos.weights"):
        model = vitpos.create_model("deit_tiny_patch16_224", checkpoint=path, join="lape", **SMALL).double().eval()
    assert model.cfg.position.join == "lape"
    assert "join 'lape' as asked" in caplog.text
    stored = {k: v.float().double() for k, v in sd.items()}  # the float32 model's copy of the weights
    x = images(16, seed=8)
    assert_close(model(x), reference.vit(stored, x, heads=4, lape=True, chained=False))
    with pytest.raises(vitpos.CheckpointError, match=r"lacks: join='lape:chained';.*--pe_joining LaPE.*join='lape'\)"):
        vitpos.load_weights(model, path)


@pytest.mark.parametrize("first_release", [True, False])
def test_a_1d_sin_checkpoint_loads_its_table_without_batch_axis(tmp_path, first_release):
    fill = layouts.Filler(seed=20)
    sd = layouts.timm_vit(fill, dim=32, depth=3, patch=4, grid=4, classes=5)
    sd["pos_embed"] = layouts.lape_sin1d(17, 32).double()  # (197, 192) at full size: unsqueeze(0) has no effect
    if first_release:
        path = _first_release(tmp_path / "sin.pth", layouts.lape_norms(sd, fill, depth=3, dim=32), pe="1D_sin")
    else:
        path = save_pth(sd, tmp_path / "sin.pth")
    model = load_float64("deit_tiny_patch16_224", path, **SMALL)
    x = images(16, seed=9)
    expected = reference.vit(sd, x, heads=4, lape=first_release, chained=False)
    assert_close(model(x), expected)
    # the same table recomputed by the fixed encoding, to the float32 rounding of the authors' table
    fixed = vitpos.create_model(
        "deit_tiny_patch16_224", checkpoint=path, absolute="sincos1d:prefix", drop=("pos_embed",), **SMALL
    )
    torch.testing.assert_close(fixed.double().eval()(x), expected, rtol=1e-4, atol=1e-4)


def test_convert_refuses_a_join_the_file_contradicts_and_writes_nothing(tmp_path, capsys):
    sd = {k: v.float() for k, v in _lape_state(21).items()}
    src, dst = _first_release(tmp_path / "first.pth", sd), tmp_path / "out"
    flags = ["--model=deit_tiny_patch16_224", "--embed-dim=32", "--depth=3", "--num-heads=4", "--patch-size=4"]
    flags += ["--img-size=16", "--num-classes=5"]
    assert main(["convert", str(src), str(dst), *flags, "--join=lape:chained"]) == 2
    err = capsys.readouterr().err
    assert "first.pth (lape layout) was trained with the join vitpos calls 'lape'" in err
    assert "not 'lape:chained': give --join lape or leave the join out" in err
    assert not dst.exists()
    assert main(["convert", str(src), str(dst), *flags]) == 0
    assert vitpos.create_model(None, checkpoint=dst).cfg.position.join == "lape"
