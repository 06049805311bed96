"""Released variants no preset fits, found by their keys and shapes: CCT-14/7x2 (ImageNet), CCT-7/7x2 sine
(Flowers-102) and T2T-ViT_t-14 load with create_model(None) and `vitpos convert` without options, exactly."""

from pathlib import Path

import pytest
import torch

import vitpos
from vitpos.cli import main
from vitpos.weights import detect_layout, guess_model
from vitpos.weights.files import WeightsFile

from . import layouts, reference
from .conftest import assert_close, images, load_float64, save_pth

CCT_STEM = dict(conv=(7, 7), channels=64)
FULL_SIZE = {
    "cct_14_7x2": (
        lambda fill: layouts.compact(fill, dim=384, depth=14, classes=1000, tokens=196, mlp=3, **CCT_STEM),
        ("cct_7_3x1", dict(embed_dim=384, num_heads=6, depth=14, mlp_ratio=3.0, conv_layers=2, conv_kernel=7,
                           img_size=224)),
    ),
    "cct_7_7x2_sine_flowers": (
        lambda fill: {**layouts.compact(fill, dim=256, depth=7, classes=102, tokens=196, **CCT_STEM),
                      "classifier.positional_emb": layouts.cct_sine(196, 256)},
        ("cct_7_3x1", dict(conv_layers=2, conv_kernel=7, img_size=224)),
    ),
    "t2t_vit_t_14": (
        lambda fill: layouts.t2t_vit(fill, dim=384, depth=14, token_dim=64, tokens=196, classes=1000,
                                     layer="transformer", mlp=3),
        ("t2t_vit_7", dict(t2t_layer="transformer", embed_dim=384, num_heads=6, depth=14, mlp_ratio=3.0)),
    ),
}  # fmt: skip
"""The authors' full-size files (shapes only: meta tensors) and the preset and fields they are found with."""


@pytest.mark.parametrize("name", FULL_SIZE)
def test_a_full_size_variant_is_found_by_its_shapes(name):
    make, expected = FULL_SIZE[name]
    state = make(layouts.Filler(meta=True))
    file = WeightsFile(Path(f"{name}.pth"), state)
    assert guess_model(file, detect_layout(state, file.path)) == expected


def _small(kind: str, seed: int) -> tuple[dict, int]:
    """A scaled-down file of ``kind`` (2 heads of 64 channels, 2 blocks, a 2x2 grid at 32 px), its reference."""
    fill = layouts.Filler(seed=seed)
    if kind == "cct_14_7x2":
        return layouts.compact(fill, dim=128, depth=2, classes=7, tokens=4, conv=(7, 7), channels=16, mlp=3), 32
    if kind == "cct_7_7x2_sine":
        sd = layouts.compact(fill, dim=128, depth=2, classes=102, tokens=4, conv=(7, 7), channels=16)
        return {**sd, "classifier.positional_emb": layouts.cct_sine(4, 128)}, 32
    return layouts.t2t_vit(fill, dim=128, depth=2, token_dim=8, tokens=4, classes=7, layer="transformer", mlp=3), 32


def _reference(kind: str, sd: dict, x: torch.Tensor) -> torch.Tensor:
    if kind.startswith("cct"):
        return reference.compact(sd, x, heads=2, conv=(7, 7))
    return reference.t2t_vit(sd, x, heads=2)


@pytest.mark.parametrize("kind", ["cct_14_7x2", "cct_7_7x2_sine", "t2t_vit_t_14"])
def test_a_variant_loads_without_options_and_equals_the_released_forward(kind, tmp_path, capsys):
    sd, size = _small(kind, seed=len(kind))
    path = save_pth(sd, tmp_path / f"{kind}.pth")
    model = load_float64(None, path)
    x = images(size)
    assert_close(model(x), _reference(kind, sd, x))
    assert main(["convert", str(path), str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "embed_dim=128, depth=2" in out and "(read from the file)" in out
    assert "num_heads=2 assumed (64 channels a head" in out and "give --num-heads otherwise" in out
    converted = vitpos.create_model(None, checkpoint=tmp_path / "out").state_dict()  # float32, as it was written
    direct = vitpos.create_model(None, checkpoint=path).state_dict()
    assert converted.keys() == direct.keys() and all(torch.equal(converted[k], direct[k]) for k in direct)


def test_a_variant_no_preset_builds_names_the_options_and_the_files_shapes(tmp_path):
    sd = layouts.compact(layouts.Filler(seed=3), dim=128, depth=2, classes=7, tokens=5, conv=(7, 7), channels=16)
    path = save_pth(sd, tmp_path / "odd.pth")
    with pytest.raises(vitpos.CheckpointError) as err:
        vitpos.create_model(None, checkpoint=path)
    said = str(err.value)
    assert "no preset fits it, nor one with the options its shapes suggest (embed_dim=128, num_heads=2" in said
    assert "conv_layers=2, conv_kernel=7, conv_channels=16" in said
    assert "classifier.positional_emb (1, 5, 128)" in said and "tokenizer.conv_layers.0.0.weight (16, 3, 7, 7)" in said


def test_a_shape_mismatch_shows_the_files_own_table(tmp_path):
    sd, _ = _small("cct_14_7x2", seed=4)
    path = save_pth(sd, tmp_path / "cct.pth")
    options = dict(conv_layers=2, conv_kernel=7, conv_channels=16, depth=2, mlp_ratio=3.0, num_classes=7)
    with pytest.raises(vitpos.CheckpointError) as err:
        vitpos.create_model("cct_7_3x1", checkpoint=path, img_size=64, embed_dim=64, num_heads=1, **options)
    assert (
        "stages.0.absolute.table (checkpoint classifier.positional_emb (1, 4, 128), fitted to (1, 16, 128), "
        "model (1, 16, 64))" in str(err.value)
    )
