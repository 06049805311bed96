"""Bad checkpoints get an error naming the file, the key and the fix, and change nothing."""

import os
import pickle

import pytest
import torch

import vitpos
from vitpos import CheckpointError
from vitpos.weights import write_checkpoint

from . import layouts
from .conftest import save_pth, save_safetensors

SMALL = dict(embed_dim=32, depth=2, num_heads=4, patch_size=4, img_size=16, num_classes=7)


def vit_state(seed: int = 0) -> dict:
    return layouts.timm_vit(layouts.Filler(seed), dim=32, depth=2, patch=4, grid=4, classes=7)


@pytest.fixture
def model():
    return vitpos.create_model("deit_tiny_patch16_224", **SMALL)


def unchanged(model, before: dict) -> bool:
    return all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def snapshot(model) -> dict:
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_checkpoint_of_another_architecture(tmp_path, model):
    sd = layouts.swin(layouts.Filler(1), (8, 16), (2, 2), (2, 2), window=4, patch=2, img=16, classes=5)
    path = save_pth(sd, tmp_path / "swin.pth")
    before = snapshot(model)
    with pytest.raises(
        CheckpointError, match=r"swin\.pth is a Microsoft's Swin.*cannot load into a 'vit' model.*same family"
    ):
        vitpos.load_weights(model, path)
    assert unchanged(model, before)


@pytest.mark.parametrize("suffix", [".pth", ".safetensors"])
def test_truncated_file(tmp_path, model, suffix):
    full = tmp_path / f"full{suffix}"
    (save_safetensors if suffix == ".safetensors" else save_pth)(vit_state(), full)
    cut = tmp_path / f"cut{suffix}"
    cut.write_bytes(full.read_bytes()[: full.stat().st_size // 2])
    with pytest.raises(CheckpointError, match=rf"cut{suffix} is truncated or corrupt.*download or copy it again"):
        vitpos.load_weights(model, cut)


def test_corrupt_bytes(tmp_path, model):
    path = tmp_path / "noise.pth"
    path.write_bytes(os.urandom(4096))
    with pytest.raises(CheckpointError, match=r"noise\.pth"):
        vitpos.load_weights(model, path)


class _RunsCode:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_pickle_that_would_run_code_is_refused_unrun(tmp_path, model):
    marker = tmp_path / "ran"
    path = tmp_path / "evil.pth"
    with open(path, "wb") as f:
        pickle.dump({"model": _RunsCode(str(marker))}, f, protocol=2)
    with pytest.raises(CheckpointError, match=r"evil\.pth holds objects other than tensors.*never unpickles.*re-save"):
        vitpos.load_weights(model, path)
    assert not marker.exists()


def test_shape_mismatch_names_the_key_and_the_fix(tmp_path, model):
    sd = vit_state()
    sd["head.weight"], sd["head.bias"] = sd["head.weight"][:3], sd["head.bias"][:3]
    path = save_pth(sd, tmp_path / "three.pth")
    before = snapshot(model)
    with pytest.raises(
        CheckpointError, match=r"three\.pth.*head\.weight \(checkpoint \(3, 32\), model \(7, 32\)\).*num_classes"
    ):
        vitpos.load_weights(model, path)
    assert unchanged(model, before)


def test_unmapped_and_missing_keys_are_listed(tmp_path, model):
    sd = vit_state()
    sd["blocks.0.attn.scale"] = torch.ones(32, dtype=torch.float64)
    del sd["norm.weight"]
    before = snapshot(model)
    with pytest.raises(
        CheckpointError, match=r"no place in the model: blocks\.0\.attn\.scale.*does not provide: norm\.weight"
    ):
        vitpos.load_weights(model, save_pth(sd, tmp_path / "odd.pth"))
    assert unchanged(model, before)


def test_unknown_layout_lists_the_known_ones(tmp_path, model):
    path = save_pth({"encoder.weight": torch.ones(2, 2)}, tmp_path / "other.pth", entry=None)
    with pytest.raises(CheckpointError, match=r"other\.pth is in no layout.*encoder\.weight.*timm-vit.*swin.*pvt"):
        vitpos.load_weights(model, path)


def test_missing_file_and_missing_entry(tmp_path, model):
    with pytest.raises(CheckpointError, match=r"nowhere\.pth does not exist"):
        vitpos.load_weights(model, tmp_path / "nowhere.pth")
    path = save_pth(vit_state(), tmp_path / "deit.pth")
    with pytest.raises(CheckpointError, match=r"deit\.pth has no entry 'model_ema'; its entries: model, epoch"):
        vitpos.load_weights(model, path, entry="model_ema")
    torch.save({"optimizer": {"lr": 0.1}}, tmp_path / "opt.pth")
    with pytest.raises(
        CheckpointError, match=r"opt\.pth is neither a state dict nor a dict with one of the entries model"
    ):
        vitpos.load_weights(model, tmp_path / "opt.pth")


def test_a_grid_mismatch_without_resampling_says_how_to_keep_the_grid(tmp_path):
    path = save_pth(vit_state(), tmp_path / "deit.pth")
    model = vitpos.create_model("deit_tiny_patch16_224", **{**SMALL, "img_size": 24})
    with pytest.raises(
        CheckpointError, match=r"pos_embed is stored for a 4x4 grid, the model's is 6x6.*keep_grid=True"
    ):
        vitpos.load_weights(model, path, resample=False)


def test_a_vit_checkpoint_into_a_swin_preset(tmp_path):
    path = save_pth(vit_state(), tmp_path / "deit.pth")
    with pytest.raises(CheckpointError, match=r"deit\.pth is a timm and DeiT ViT.*cannot load into a 'swin' model"):
        vitpos.create_model("swin_tiny", checkpoint=path)
    lape = layouts.lape_norms(vit_state(), layouts.Filler(2), depth=2, dim=32)
    swin = vitpos.create_model("swin_tiny", embed_dims=(8, 16), depths=(2, 2), num_heads=(2, 2), mlp_ratios=(4.0, 4.0))
    with pytest.raises(CheckpointError, match=r"lape\.pth is a LaPE authors' ViT.*cannot load into a 'swin' model"):
        vitpos.load_weights(swin, save_pth(lape, tmp_path / "lape.pth"))


def test_loading_options_without_weights_are_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="resize apply to loading weights; give checkpoint=PATH"):
        vitpos.create_model("deit_tiny_patch16_224", resize="timm", **SMALL)
    with pytest.raises(ValueError, match="give checkpoint=PATH or pretrained=True, not both"):
        vitpos.create_model("deit_tiny_patch16_224", checkpoint=tmp_path / "w.pth", pretrained=True)


def test_a_vitpos_folder_has_two_entries(tmp_path, model):
    folder = write_checkpoint(model, tmp_path / "converted")
    with pytest.raises(CheckpointError, match=r"converted is a vitpos checkpoint folder; its entries are 'model'"):
        vitpos.load_weights(model, folder, entry="state_dict")
