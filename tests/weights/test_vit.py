"""timm / DeiT ViT checkpoints load into vitpos's ViT and give the released model's outputs."""

import pytest
import torch

import vitpos
from vitpos.weights import CheckpointError, write_checkpoint

from . import layouts, reference
from .conftest import assert_close, images, load_float64, save_pth, save_safetensors

SMALL = dict(embed_dim=32, depth=2, num_heads=4, patch_size=4, img_size=16, num_classes=7)


def small_state(seed: int = 0) -> dict:
    return layouts.timm_vit(layouts.Filler(seed), dim=32, depth=2, patch=4, grid=4, classes=7)


def test_deit_checkpoint_equals_released_forward(tmp_path):
    sd = small_state()
    model = load_float64("deit_tiny_patch16_224", save_pth(sd, tmp_path / "deit.pth"), **SMALL)
    x = images(16)
    assert_close(model(x), reference.vit(sd, x, heads=4))


def test_safetensors_and_bare_state_dicts_load_the_same(tmp_path):
    sd = small_state(seed=3)
    x = images(16)
    outputs = [
        load_float64("deit_tiny_patch16_224", path, **SMALL)(x)
        for path in (save_safetensors(sd, tmp_path / "w.safetensors"), save_pth(sd, tmp_path / "bare.pth", entry=None))
    ]
    torch.testing.assert_close(outputs[0], outputs[1], rtol=0, atol=0)
    assert_close(outputs[0], reference.vit(sd, x, heads=4))


def test_load_weights_into_a_built_model(tmp_path):
    assert vitpos.load_checkpoint is vitpos.load_weights  # the earlier name the README showed
    sd = small_state(seed=4)
    model = vitpos.create_model("deit_tiny_patch16_224", **SMALL).double().eval()
    result = vitpos.load_weights(model, save_pth(sd, tmp_path / "deit.pth"))
    assert result.layout == "timm-vit" and result.dropped == []
    x = images(16)
    assert_close(model(x), reference.vit(sd, x, heads=4))


def test_another_class_count_reinitialises_only_the_head(tmp_path):
    sd = small_state(seed=5)
    model = load_float64("deit_tiny_patch16_224", save_pth(sd, tmp_path / "deit.pth"), **{**SMALL, "num_classes": 3})
    assert model.head.weight.shape == (3, 32)
    x = images(16)
    ours = model.forward_head(model.forward_tokens(x), pre_logits=True)
    sd_no_head = {
        **sd,
        "head.weight": torch.eye(32, dtype=torch.float64),
        "head.bias": torch.zeros(32, dtype=torch.float64),
    }
    assert_close(ours, reference.vit(sd_no_head, x, heads=4))


def test_a_drop_that_would_discard_the_files_values_is_refused(tmp_path):
    sd = small_state(seed=6)
    model = vitpos.create_model("deit_tiny_patch16_224", **SMALL)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(CheckpointError, match=r"drop=\('norm',\) would keep norm\.bias, norm\.weight at their init"):
        vitpos.load_weights(model, save_pth(sd, tmp_path / "deit.pth"), drop=("norm",))
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    result = vitpos.load_weights(model, save_pth(sd, tmp_path / "deit.pth"), drop=("head",))  # the classifier may go
    assert result.dropped == ["head.bias", "head.weight"] and torch.equal(model.head.weight, before["head.weight"])
    assert torch.equal(model.norm.weight, sd["norm.weight"].float())


def test_ddp_prefix_and_ema_entry(tmp_path):
    sd, ema = small_state(seed=7), small_state(seed=8)
    path = tmp_path / "train.pth"
    torch.save({"model": {f"module.{k}": v for k, v in sd.items()}, "model_ema": ema}, path)
    x = images(16)
    plain = load_float64("deit_tiny_patch16_224", path, **SMALL)
    assert_close(plain(x), reference.vit(sd, x, heads=4))
    model = vitpos.create_model("deit_tiny_patch16_224", **SMALL).double().eval()
    vitpos.load_weights(model, path, entry="model_ema")
    assert_close(model(x), reference.vit(ema, x, heads=4))


def test_drop_patterns_cover_new_parameters_and_unused_checkpoint_keys(tmp_path):
    sd = small_state(seed=9)
    model = vitpos.create_model(
        "deit_tiny_patch16_224", **{**SMALL, "absolute": "sincos2d", "relative": "irpe:product:ctx:k"}
    )
    result = vitpos.load_weights(model, save_pth(sd, tmp_path / "deit.pth"), drop=("pos_embed", "*.relative.*"))
    assert result.dropped == ["stages.0.blocks.0.attn.relative.table_k", "stages.0.blocks.1.attn.relative.table_k"]
    assert torch.equal(model.stages[0].blocks[1].mlp.fc2.weight, sd["blocks.1.mlp.fc2.weight"].float())


def test_create_model_needs_a_name_or_a_checkpoint():
    with pytest.raises(ValueError, match="needs a preset name or a config"):
        vitpos.create_model(None)


def test_load_model_rebuilds_a_converted_folder(tmp_path):
    sd = small_state(seed=6)
    direct = vitpos.create_model("deit_tiny_patch16_224", checkpoint=save_pth(sd, tmp_path / "deit.pth"), **SMALL)
    folder = write_checkpoint(direct, tmp_path / "converted")
    model, saved = vitpos.load_model(folder)
    assert saved.model_config == direct.cfg and saved.step == 0 and not model.training
    x = images(16).float()
    with torch.no_grad():
        torch.testing.assert_close(model(x), direct.eval()(x), rtol=0, atol=0)


def test_timms_vit_small_name_loads_its_files(tmp_path):
    # timm builds vit_small_patch16_224 and deit_small_patch16_224 from the same arguments
    assert vitpos.get_config("vit_small_patch16_224") == vitpos.get_config("deit_small_patch16_224")
    with torch.device("meta"):
        full = vitpos.create_model("vit_small_patch16_224")
    assert sum(p.numel() for p in full.parameters()) == 22_050_664
    sd = small_state(seed=9)
    model = load_float64("vit_small_patch16_224", save_pth(sd, tmp_path / "vit_s.pth"), **SMALL)
    x = images(16)
    assert_close(model(x), reference.vit(sd, x, heads=4))
