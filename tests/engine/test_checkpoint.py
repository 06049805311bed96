"""Checkpoints: round trip, atomic replacement, pruning, clear errors for bad files, earlier formats."""

import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import vitpos
from vitpos.engine import checkpoint as ckpt_mod
from vitpos.engine.checkpoint import (
    CheckpointError,
    check_same_model,
    find_checkpoint,
    latest_checkpoint,
    load_training_checkpoint,
    save_checkpoint,
)
from vitpos.models.vit import upgrade_state_dict
from vitpos.weights import load_model, load_weights

from ..conftest import TINY


def _save(run_dir, step, model, keep=1, ema=None):
    meta = {"model_config": model.cfg.to_dict(), "train_config": {"data": "digits"}, "data": {"spec": "digits"}}
    state = {
        "step": step,
        "optimizer": torch.optim.AdamW(model.parameters()).state_dict(),
        "history": [{"epoch": 1, "val_acc1": 50.0}],
    }
    return save_checkpoint(run_dir, step, model, meta, state, ema=ema, keep=keep)


@pytest.fixture
def model():
    return vitpos.create_model("vit_lite_7_4", **TINY)


def test_round_trip(tmp_path, model):
    ema = vitpos.create_model("vit_lite_7_4", **TINY)
    folder = _save(tmp_path, 7, model, ema=ema)
    assert folder == tmp_path / "checkpoints" / "step-00000007" and latest_checkpoint(tmp_path) == folder
    # the training state alone loads under the safe loader
    state = torch.load(folder / "state.pt", weights_only=True)
    assert state["step"] == 7 and state["history"][0]["val_acc1"] == 50.0
    ckpt = load_training_checkpoint(tmp_path)
    assert ckpt.step == 7 and ckpt.model_config == model.cfg and ckpt.train_config["data"] == "digits"
    assert all(torch.equal(ckpt.weights[k], v) for k, v in model.state_dict().items())
    assert all(torch.equal(ckpt.ema[k], v) for k, v in ema.state_dict().items())
    rebuilt, _ = load_model(folder / "model.safetensors")
    x = torch.randn(2, 3, 32, 32)
    assert torch.equal(rebuilt(x), model.eval()(x))
    assert torch.equal(load_model(tmp_path, ema=True)[0](x), ema.eval()(x))


def test_newest_kept_and_pointer_moved(tmp_path, model):
    for step in (1, 2, 3):
        _save(tmp_path, step, model, keep=2)
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == ["latest", "step-00000002", "step-00000003"]
    assert (tmp_path / "checkpoints" / "latest").read_text().strip() == "step-00000003"


def test_a_crash_while_writing_keeps_the_previous_checkpoint(tmp_path, model, monkeypatch):
    first = _save(tmp_path, 1, model)
    before = {p.name: p.read_bytes() for p in first.iterdir()}

    def dies(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(ckpt_mod.torch, "save", dies)
    with pytest.raises(OSError, match="disk full"):
        _save(tmp_path, 2, model)
    monkeypatch.undo()
    assert latest_checkpoint(tmp_path) == first
    assert {p.name: p.read_bytes() for p in first.iterdir()} == before
    assert load_training_checkpoint(tmp_path).step == 1
    _save(tmp_path, 3, model)  # the next save clears the half-written folder
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["latest", "step-00000003"]


@pytest.mark.parametrize("name", ["model.safetensors", "state.pt"])
def test_truncated_file_is_a_clear_error(tmp_path, model, name):
    folder = _save(tmp_path, 1, model)
    data = (folder / name).read_bytes()
    (folder / name).write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=rf"{name} is truncated or corrupt"):
        load_training_checkpoint(tmp_path)


def test_not_a_checkpoint(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        find_checkpoint(tmp_path / "nowhere")
    with pytest.raises(CheckpointError, match="holds no checkpoint"):
        find_checkpoint(tmp_path)


def test_mismatches_are_named(model):
    other = vitpos.get_config("vit_lite_7_4", **{**TINY, "num_classes": 7, "depth": 3})
    with pytest.raises(
        CheckpointError, match="num_classes: checkpoint 5, requested 7; depth: checkpoint 2, requested 3"
    ):
        check_same_model(model.cfg, other, "RUN")
    wider = vitpos.create_model("vit_lite_7_4", **{**TINY, "num_classes": 7})
    with pytest.raises(CheckpointError, match=r"head.weight \(checkpoint \(5, 32\), model \(7, 32\)\)"):
        load_weights(wider, model.state_dict())
    gap = vitpos.create_model("vit_lite_7_4", **{**TINY, "head": "gap"})
    with pytest.raises(CheckpointError, match="keys with no place in the model: cls_token"):
        load_weights(gap, model.state_dict())


LEGACY = Path(__file__).parent.parent / "fixtures" / "legacy"


@pytest.mark.parametrize("name", ["deit_tiny_patch16_224", "cpvt_ti_gap", "swin_tiny"])
def test_format_1_checkpoint_with_the_earlier_vit_names_loads_as_a_run_checkpoint(tmp_path, name):
    folder = tmp_path / "step-00000001"
    folder.mkdir()
    shutil.copy(LEGACY / f"{name}.safetensors", folder / "model.safetensors")  # written by the earlier hosts
    model, _ = load_model(folder)
    converted = vitpos.create_model(None, checkpoint=folder).eval()  # the same file as `vitpos convert` wrote it
    io = load_file(LEGACY / f"{name}.io.safetensors")
    with torch.no_grad():
        for loaded in (model, converted):
            torch.testing.assert_close(loaded.double()(io["input"]), io["logits"], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["deit_tiny_patch16_224", "pvt_tiny", "swin_tiny"])
def test_upgrade_leaves_current_names_alone(name):
    with torch.device("meta"):
        state = vitpos.create_model(name).state_dict()
    assert list(upgrade_state_dict(state)) == list(state)
    old = {
        "patch_embed.proj.weight": 0,
        "blocks.3.attn.qkv.weight": 1,
        "absolute.table": 2,
        "cls_token": 3,
        "norm.bias": 4,
    }
    assert upgrade_state_dict(old) == {
        "downsamples.0.proj.weight": 0,
        "stages.0.blocks.3.attn.qkv.weight": 1,
        "stages.0.absolute.table": 2,
        "cls_token": 3,
        "norm.bias": 4,
    }
