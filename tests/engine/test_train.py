"""The trainer end to end on tiny runs: it learns, it is deterministic, it refuses bad input."""

import pytest
import torch

from vitpos.engine import CheckpointError, RunRequest, train
from vitpos.engine.checkpoint import latest_checkpoint

from .conftest import tiny_request, without_times


def test_direction_clearly_above_chance():
    result = train(*tiny_request("direction").resolve())
    assert result.test["acc1"] > 80.0  # chance: 50
    assert [row["epoch"] for row in result.history] == [1, 2, 3, 4]
    assert result.history[-1]["step"] == 4 * 512 // 32


def test_distance_reaches_a_positive_r2():
    result = train(*tiny_request("distance").resolve())
    assert result.test["r2"] > 0.2
    assert "acc1" not in result.test and result.history[-1]["val_r2"] > 0.2


def test_digits_trains():
    request = RunRequest(
        "thesis_vit",
        {"embed_dim": 64, "head": "gap", "absolute": "sincos2d"},
        {"data": "digits", "epochs": 3, "batch_size": 64, "lr": 3e-3, "progress": False},
    )
    model_cfg, train_cfg, data = request.resolve()
    assert (model_cfg.img_size, model_cfg.in_chans, model_cfg.num_classes) == (8, 1, 10)
    assert train(model_cfg, train_cfg, data).test["acc1"] > 50.0  # chance: 10


def test_same_seed_same_run():
    a = train(*tiny_request(n=128, epochs=2).resolve())
    b = train(*tiny_request(n=128, epochs=2).resolve())
    assert without_times(a.history) == without_times(b.history)
    assert all(torch.equal(p, q) for p, q in zip(a.model.parameters(), b.model.parameters(), strict=True))
    c = train(*tiny_request(n=128, epochs=2, seed=1).resolve())
    assert without_times(c.history) != without_times(a.history)


def test_ema_mixup_cutmix_smoothing_on_real_data():
    request = RunRequest(
        "thesis_vit",
        {"embed_dim": 32, "num_heads": 2},
        {
            "data": "digits",
            "epochs": 1,
            "batch_size": 64,
            "ema_decay": 0.9,
            "mixup": 0.2,
            "cutmix": 1.0,
            "label_smoothing": 0.1,
            "crop_scale": 0.5,
            "hflip": 0.5,
            "progress": False,
        },
    )
    result = train(*request.resolve())
    row = result.history[0]
    assert "train_loss" in row and "train_acc1" not in row  # no accuracy against mixed targets
    assert {"val_acc1", "ema_val_acc1"} <= set(row) and "ema_acc1" in result.test
    assert not all(torch.equal(p, q) for p, q in zip(result.model.parameters(), result.ema.parameters(), strict=True))


@pytest.mark.parametrize("option", [{"hflip": 0.5}, {"crop_scale": 0.5}, {"cutmix": 1.0}])
def test_position_changing_augmentation_is_refused_on_synthetic_tasks(option):
    with pytest.raises(ValueError, match="would change the labels of synthetic:direction"):
        train(*tiny_request(n=64, **option).resolve())


def test_label_mixing_is_refused_for_regression():
    with pytest.raises(ValueError, match="need a classification task"):
        train(*tiny_request("distance", n=64, mixup=0.2).resolve())


def test_image_size_not_divisible_by_the_patch():
    with pytest.raises(ValueError, match="not divisible by patch_size 4"):
        tiny_request(model={"img_size": 18}).resolve()
    digits_on_big_patches = RunRequest("thesis_vit", {"patch_size": 16}, {"data": "digits"})
    with pytest.raises(ValueError, match="pass --img-size"):
        digits_on_big_patches.resolve()


def _checkpoint_bytes(run_dir):
    folder = latest_checkpoint(run_dir)
    return folder, {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_existing_run_is_never_overwritten(tmp_path):
    train(*tiny_request(n=64, epochs=1, run_dir=str(tmp_path)).resolve())
    before = _checkpoint_bytes(tmp_path)
    with pytest.raises(ValueError, match="already holds checkpoint step-00000002; pass --resume"):
        train(*tiny_request(n=64, epochs=1, run_dir=str(tmp_path)).resolve())
    assert _checkpoint_bytes(tmp_path) == before


@pytest.mark.parametrize(
    "change,message",
    [
        (dict(task="direction4"), "num_classes: checkpoint 2, requested 4"),
        (dict(model={"depth": 2}), "depth: checkpoint 1, requested 2"),
        (dict(model={"absolute": "learned"}), "absolute: checkpoint 'sincos2d', requested 'learned'"),
    ],
)
def test_resuming_with_another_model_is_a_clear_error(tmp_path, change, message):
    train(*tiny_request(n=64, epochs=1, run_dir=str(tmp_path)).resolve())
    before = _checkpoint_bytes(tmp_path)
    with pytest.raises(CheckpointError, match=message):
        train(*tiny_request(n=64, epochs=2, run_dir=str(tmp_path), **change).resolve(), resume=True)
    assert _checkpoint_bytes(tmp_path) == before


def test_resume_from_a_mid_epoch_checkpoint_is_exact(tmp_path):
    full_dir, cut_dir = tmp_path / "full", tmp_path / "cut"
    full = train(*tiny_request(n=128, epochs=3, save_every=3, keep_checkpoints=100, run_dir=str(full_dir)).resolve())
    # pretend the run died after step 6 of 12 (mid-epoch 2): copy that checkpoint alone
    (cut_dir / "checkpoints").mkdir(parents=True)
    (full_dir / "checkpoints" / "step-00000006").rename(cut_dir / "checkpoints" / "step-00000006")
    resumed = train(*tiny_request(n=128, epochs=3, save_every=3, run_dir=str(cut_dir)).resolve(), resume=True)
    assert without_times(resumed.history) == without_times(full.history)
    assert all(torch.equal(p, q) for p, q in zip(full.model.parameters(), resumed.model.parameters(), strict=True))
    assert resumed.test == full.test
