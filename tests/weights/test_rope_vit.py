"""RoPE-ViT's DeiT files (naver-ai/rope-vit): found by their shapes with no options and exact in float64 against
their forward pass, at the trained size and at larger ones (their plain bicubic resampling of the table)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
import torch

import vitpos
from vitpos.weights import CheckpointError, detect_layout, guess_model
from vitpos.weights.files import WeightsFile

from .conftest import assert_close, images, load_float64, save_pth
from .layouts import Filler
from .rope_vit_reference import rope_swin, rope_swin_file, rope_vit, rope_vit_file

KINDS = {"axial": (False, False), "mixed": (True, False), "axial_ape": (False, True), "mixed_ape": (True, True)}
"""RoPE-ViT's four DeiT models by their names' word: (mixed, ape)."""
SIZES = {"small": (384, 12, 6), "base": (768, 12, 12), "large": (1024, 24, 16)}
SMALL = dict(dim=128, depth=2, heads=2, grid=4, classes=7)
"""A scaled-down file: 2 heads of 64 channels, 2 blocks, a 4x4 grid at 64 px."""


def _save(kind: str, path: Path, seed: int = 0, args: str | None = None) -> tuple[dict, Path]:
    mixed, ape = KINDS[kind]
    sd = rope_vit_file(Filler(seed), mixed=mixed, ape=ape, **SMALL)
    if args is None:
        return sd, save_pth(sd, path)
    torch.save({"model": sd, "args": argparse.Namespace(model=args)}, path)
    return sd, path


def _trained_as(kind: str) -> str | None:
    """The stored --model that tells a RoPE-Axial file with a table from a DeiT III one."""
    return f"rope_{kind}_deit_small_patch16_LS" if kind == "axial_ape" else None


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("kind", KINDS)
def test_a_released_file_is_found_by_its_shapes(kind, size):
    dim, depth, heads = SIZES[size]
    mixed, ape = KINDS[kind]
    state = rope_vit_file(
        Filler(meta=True), dim=dim, depth=depth, heads=heads, grid=14, classes=1000, mixed=mixed, ape=ape
    )
    name = f"rope_{kind}_deit_{size}_patch16_LS"
    file = WeightsFile(Path(f"{name}.pth"), state, args={"model": name})
    layout = detect_layout(state, file.path)
    assert layout.name == "deit3"
    assert guess_model(file, layout) == (name, {})
    if kind == "axial_ape":  # the same keys and shapes as DeiT III's file: only the stored name tells
        with pytest.raises(CheckpointError, match=rf"several presets fit it \(deit3_{size}_patch16_224, {name}\)"):
            guess_model(WeightsFile(file.path, state), layout)
        deit3 = WeightsFile(file.path, state, args={"model": f"deit_{size}_patch16_LS"})
        assert guess_model(deit3, layout) == (f"deit3_{size}_patch16_224", {})
    else:
        assert guess_model(WeightsFile(file.path, state), layout) == (name, {})


@pytest.mark.parametrize("kind", KINDS)
def test_a_file_loads_with_no_options_and_equals_their_forward(kind, tmp_path, caplog):
    sd, path = _save(kind, tmp_path / f"{kind}.pth", seed=len(kind), args=_trained_as(kind))
    model = load_float64(None, path)
    cfg = model.cfg
    mixed, ape = KINDS[kind]
    trained = 64 if mixed or ape else 224  # RoPE-Axial alone stores nothing that shows a size: the preset's
    assert (cfg.embed_dim, cfg.depth, cfg.num_heads, cfg.img_size, cfg.num_classes) == (128, 2, 2, trained, 7)
    assert "num_heads=2 is assumed" in caplog.text
    for height, width in ((64, 64), (96, 96), (64, 112)):  # the trained size, larger, not square
        x = images(height)[..., :height, :height] if height == width else torch.randn(2, 3, height, width).double()
        assert_close(model(x), rope_vit(sd, x, heads=2, mixed=mixed, trained_grid=4))


@pytest.mark.parametrize("kind", KINDS)
def test_a_larger_model_resamples_the_table_on_load_as_their_forward_does(kind, tmp_path):
    sd, path = _save(kind, tmp_path / f"{kind}.pth", seed=3, args=_trained_as(kind))
    model = load_float64(None, path, img_size=112)
    assert model.cfg.img_size == 112 and model.stages[0].blocks[0].attn.relative is not None
    x = images(112)
    assert_close(model(x), rope_vit(sd, x, heads=2, mixed=KINDS[kind][0], trained_grid=4))


@pytest.mark.parametrize("kind", KINDS)
def test_the_named_preset_loads_the_file(kind, tmp_path):
    sd, path = _save(kind, tmp_path / f"{kind}.pth", seed=5)
    fields = dict(embed_dim=128, depth=2, num_heads=2, img_size=64, num_classes=7)
    model = load_float64(f"rope_{kind}_deit_small_patch16_LS", path, **fields)
    x = images(64)
    assert_close(model(x), rope_vit(sd, x, heads=2, mixed=KINDS[kind][0], trained_grid=4))


def test_the_frequencies_and_layer_scale_land_in_their_blocks(tmp_path):
    sd, path = _save("mixed_ape", tmp_path / "mixed.pth", seed=9)
    model = vitpos.create_model(None, checkpoint=path)
    block = model.stages[0].blocks[1]
    freqs = block.attn.relative.mixed_freqs
    assert freqs.shape == (2, 2, 32)  # (x, y), heads, head_dim / 2
    assert torch.equal(freqs, sd["freqs"][:, 1].reshape(2, 2, 32).float())
    assert torch.equal(block.ls2.gamma, sd["blocks.1.gamma_2"].float())
    assert model.stages[0].absolute.prefix_table is None
    assert torch.equal(model.stages[0].absolute.table, sd["pos_embed"].float())


def test_coordinates_that_are_not_a_grid_are_refused(tmp_path):
    sd = rope_vit_file(Filler(1), mixed=True, ape=False, **SMALL)
    sd["freqs_t_x"] = sd["freqs_t_x"].flip(0)
    with pytest.raises(CheckpointError, match=r"freqs_t_x, freqs_t_y are not the column and row of every cell"):
        vitpos.create_model("rope_mixed_deit_small_patch16_LS", checkpoint=save_pth(sd, tmp_path / "bad.pth"))


def test_timms_deit3_layout_selects_layer_scale_and_the_prefix_free_table(tmp_path):
    sd = rope_vit_file(Filler(11), mixed=False, ape=True, **SMALL)  # DeiT III's file, in timm's names
    timm = {re.sub(r"\.gamma_([12])$", r".ls\1.gamma", k): v for k, v in sd.items()}
    path = save_pth(timm, tmp_path / "deit3_timm.pth")
    fields = dict(embed_dim=128, depth=2, num_heads=2, img_size=64, num_classes=7)
    model = load_float64("deit_small_patch16_224", path, **fields)
    assert model.cfg.layer_scale is not None and model.cfg.position.absolute == "learned:noprefix"
    x = images(64)
    assert_close(model(x), rope_vit(sd, x, heads=2, mixed=None, trained_grid=4))
    assert detect_layout(timm, path).name == "timm-vit"


@pytest.mark.parametrize("kind", ["axial", "mixed"])
def test_their_swin_files_load_into_the_named_preset_and_equal_their_forward(kind, tmp_path):
    shapes = dict(dims=(32, 64), depths=(2, 2), heads=(2, 4))
    sd = rope_swin_file(Filler(13), mixed=kind == "mixed", **shapes)
    path = save_pth(sd, tmp_path / f"swin_{kind}.pth")
    assert detect_layout(sd, path).name == "rope-swin"
    fields = dict(embed_dims=(32, 64), depths=(2, 2), num_heads=(2, 4), mlp_ratios=(4.0, 4.0), img_size=56)
    model = load_float64(f"swin_rope_{kind}_tiny_patch4_window7_224", path, num_classes=7, **fields)
    assert model.cfg.position.relative.startswith("rope2d:mixed")  # the stored frequencies, axial ones too
    x = images(56)
    assert_close(model(x), rope_swin(sd, x, depths=(2, 2), heads=(2, 4)))


@pytest.mark.parametrize("size", ["tiny", "small"])
@pytest.mark.parametrize("kind", ["axial", "mixed"])
def test_their_swin_files_are_found_by_their_shapes_and_frequencies(kind, size):
    depths = (2, 2, 6 if size == "tiny" else 18, 2)
    shapes = dict(dims=(96, 192, 384, 768), depths=depths, heads=(3, 6, 12, 24), img=224)
    state = rope_swin_file(Filler(meta=True), mixed=kind == "mixed", **shapes)
    file = WeightsFile(Path("swin_rope.pth"), state)
    assert guess_model(file, detect_layout(state, file.path)) == (f"swin_rope_{kind}_{size}_patch4_window7_224", {})
