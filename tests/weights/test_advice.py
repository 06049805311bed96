"""Every option a refusal suggests is applied here, as the message spells it, to the file it was given: each loads
strictly and gives the released forward exactly. A refusal with nothing that would load suggests nothing."""

from __future__ import annotations

import re

import pytest
import torch

import vitpos
from vitpos.weights import CheckpointError

from . import layouts, reference
from .conftest import assert_close, images, save_pth
from .rope_vit_reference import rope_vit, rope_vit_file

ROPE = dict(dim=128, depth=2, heads=2, grid=4, classes=7)
"""A scaled-down RoPE-ViT file (64 px)."""
DEIT = dict(embed_dim=16, depth=2, num_heads=2, patch_size=4, img_size=16)


def refusal(call, *args, **kwargs) -> str:
    """The message of the CheckpointError ``call`` raises."""
    with pytest.raises(CheckpointError) as error:
        call(*args, **kwargs)
    return str(error.value)


def suggested_calls(message: str) -> list[str]:
    """The ``vitpos.create_model(...)`` calls a message suggests."""
    return re.findall(r"vitpos\.create_model\([^()]*\)", message)


def run_call(call: str, path) -> torch.nn.Module:
    """A suggested call with PATH the file; then loaded again in float64 (no weight through float32)."""
    model = eval(call, {"vitpos": vitpos, "PATH": path}).double().eval()  # the message's own text
    vitpos.load_weights(model, path)
    return model


def test_a_file_given_to_another_model_names_the_preset_it_fits(tmp_path):
    sd = rope_vit_file(layouts.Filler(1), mixed=True, ape=False, **ROPE)
    path = save_pth(sd, tmp_path / "mixed.pth")
    message = refusal(vitpos.create_model, "deit_small_patch16_224", checkpoint=path)
    (call,) = suggested_calls(message)
    assert re.match(r"vitpos\.create_model\('rope_mixed_deit_\w+_patch16_LS', checkpoint=PATH, num_classes=7, ", call)
    x = images(64)
    assert_close(run_call(call, path)(x), rope_vit(sd, x, heads=2, mixed=True, trained_grid=4))


def test_a_file_that_fits_two_presets_names_both_and_each_loads(tmp_path):
    sd = rope_vit_file(layouts.Filler(2), mixed=False, ape=True, **ROPE)  # DeiT III and RoPE-Axial + APE alike
    path = save_pth(sd, tmp_path / "axial_ape.pth")
    message = refusal(vitpos.create_model, None, checkpoint=path)
    assert re.search(r"several presets fit it \(deit3_\w+_patch16_224, rope_axial_ape_deit_\w+_patch16_LS\)", message)
    deit3, rope = suggested_calls(message)
    x = images(64)
    assert_close(run_call(deit3, path)(x), rope_vit(sd, x, heads=2, mixed=None, trained_grid=4))
    assert_close(run_call(rope, path)(x), rope_vit(sd, x, heads=2, mixed=False, trained_grid=4))


def test_the_released_options_a_model_lacks_are_named_and_suffice(tmp_path):
    sd = rope_vit_file(layouts.Filler(3), mixed=False, ape=True, **ROPE)
    path = save_pth(sd, tmp_path / "deit3.pth")
    fields = dict(embed_dim=128, depth=2, num_heads=2, img_size=64, num_classes=7)
    model = vitpos.create_model("deit_small_patch16_224", **fields)
    message = refusal(vitpos.load_weights, model, path)
    options = dict(re.findall(r"(\w+)=('[^']*'|[\d.e-]+)", message.split("lacks: ")[1].split(";")[0]))
    assert options == {"layer_scale": "0.0001", "absolute": "'learned:noprefix'"}
    built = vitpos.create_model("deit_small_patch16_224", **fields, **{k: eval(v) for k, v in options.items()})
    vitpos.load_weights(built.double().eval(), path)
    x = images(64)
    assert_close(built(x), rope_vit(sd, x, heads=2, mixed=None, trained_grid=4))


def test_a_classifier_of_another_size_names_both_ways(tmp_path):
    sd = layouts.timm_vit(layouts.Filler(4), dim=16, depth=2, patch=4, grid=4, classes=7)
    path = save_pth(sd, tmp_path / "deit.pth")
    model = vitpos.create_model("deit_tiny_patch16_224", **DEIT, num_classes=5)
    message = refusal(vitpos.load_weights, model, path)
    assert "pass num_classes=7 to create_model" in message and "(or drop=('head',))" in message
    kept = vitpos.create_model("deit_tiny_patch16_224", checkpoint=path, **DEIT, num_classes=7).double().eval()
    vitpos.load_weights(kept, path)
    x = images(16)
    assert_close(kept(x), reference.vit(sd, x, heads=2))
    assert vitpos.load_weights(model, path, drop=("head",)).dropped == ["head.bias", "head.weight"]
    assert torch.equal(model.norm.weight, sd["norm.weight"].float())


def test_a_table_for_another_grid_without_resampling_names_both_ways(tmp_path):
    sd = layouts.timm_vit(layouts.Filler(5), dim=16, depth=2, patch=4, grid=4, classes=5)
    path = save_pth(sd, tmp_path / "deit.pth")
    model = vitpos.create_model("deit_tiny_patch16_224", **{**DEIT, "img_size": 32}, num_classes=5)
    message = refusal(vitpos.load_weights, model, path, resample=False)
    assert "allow resampling (resample=True)" in message and "keep_grid=True" in message
    vitpos.load_weights(model, path, resample=True)
    kept = vitpos.create_model(
        "deit_tiny_patch16_224", checkpoint=path, keep_grid=True, **{**DEIT, "img_size": 32}, num_classes=5
    ).double()
    vitpos.load_weights(kept, path)
    assert kept.cfg.img_size == 16
    x = images(16)
    assert_close(kept.eval()(x), reference.vit(sd, x, heads=2))


def test_a_drop_that_discards_the_files_values_is_refused_and_leaving_it_out_loads(tmp_path):
    sd = rope_vit_file(layouts.Filler(6), mixed=True, ape=True, **ROPE)
    path = save_pth(sd, tmp_path / "mixed_ape.pth")
    model = vitpos.create_model(None, checkpoint=path)
    message = refusal(vitpos.load_weights, model, path, drop=("*.relative.*", "*.ls1.*"))
    assert "although checkpoint" in message and "leave them out of drop" in message
    vitpos.load_weights(model.double().eval(), path)
    x = images(64)
    assert_close(model(x), rope_vit(sd, x, heads=2, mixed=True, trained_grid=4))


def test_a_file_no_preset_fits_suggests_nothing(tmp_path):
    sd = layouts.timm_vit(layouts.Filler(7), dim=16, depth=2, patch=4, grid=4, classes=5)
    message = refusal(vitpos.create_model, None, checkpoint=save_pth(sd, tmp_path / "odd.pth"))
    assert "no preset fits it" in message and "name the model with the options its authors built it with" in message
    assert not suggested_calls(message) and "drop=" not in message
    model = vitpos.create_model("deit_tiny_patch16_224", **{**DEIT, "depth": 3}, num_classes=5)
    message = refusal(vitpos.load_weights, model, sd)
    assert not suggested_calls(message) and "drop=" not in message and "vitpos convert" not in message


def test_a_distilled_file_given_to_a_plain_model_names_the_option_that_loads_it(tmp_path):
    sd = layouts.deit_distilled(layouts.Filler(8), dim=32, depth=2, patch=4, grid=4, classes=7)
    path = save_pth(sd, tmp_path / "distilled.pth")
    fields = dict(embed_dim=32, depth=2, num_heads=4, patch_size=4, img_size=16, num_classes=7)
    message = refusal(vitpos.create_model, "deit_tiny_patch16_224", checkpoint=path, **fields)
    assert "build the model with distilled=True" in message
    model = vitpos.create_model("deit_tiny_patch16_224", checkpoint=path, **fields, distilled=True).double().eval()
    vitpos.load_weights(model, path)
    x = images(16)
    assert_close(model(x), reference.deit_distilled(sd, x, heads=4))
