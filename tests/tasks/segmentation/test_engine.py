"""Segmentation in the engine: `vitpos train` / `vitpos eval` report mIoU; checkpoints, resume, autocast."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch
import yaml

import vitpos
from vitpos.cli import main
from vitpos.engine import RunRequest, train
from vitpos.errors import VitposError

from ...engine.conftest import without_times

TINY_FPN = dict(
    patch_size=2,
    embed_dims=[8, 16, 24, 32],
    depths=[1, 1, 1, 1],
    num_heads=[1, 2, 3, 4],
    mlp_ratios=[2, 2, 2, 2],
    sr_ratios=[4, 2, 1, 1],
    fpn_dim=16,
    head_dim=16,
    norm_groups=4,
    head_dropout=0.0,
    drop_path_rate=0.0,
)
"""pvt_tiny_fpn shrunk to stride 16 and widths 8-32, with a 16-channel FPN and head."""
HOST_FIELDS = ("patch_size", "embed_dims", "depths", "num_heads", "mlp_ratios", "sr_ratios", "drop_path_rate")
DATA = "synthetic:segment:img=32:square=8:train=32:val=8:test=8"
DIRECTION = "synthetic:direction:img=32:train=8:val=8:test=8"


def request(preset: str = "pvt_tiny_fpn", data: str = DATA, **train_options) -> RunRequest:
    options = {"data": data, "epochs": 2, "batch_size": 8, "lr": 3e-3, "warmup_epochs": 0, "progress": False}
    options |= train_options
    return RunRequest(preset, dict(TINY_FPN), options)


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny models on one thread."""


def test_train_and_eval_commands_report_miou(tmp_path: Path, capsys) -> None:
    config = tmp_path / "seg.yaml"
    model = {"preset": "pvt_tiny_peg_gap_fpn", **TINY_FPN}
    config.write_text(yaml.safe_dump({"model": model, "train": {"data": DATA, "epochs": 1, "batch_size": 8}}))
    run_dir = tmp_path / "run"
    assert main(["train", f"--config={config}", f"--run-dir={run_dir}", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"train_miou [\d.]+% .*val_miou [\d.]+%", out) and re.search(
        r"test loss [\d.]+  miou [\d.]+%", out
    )
    assert main(["eval", f"--checkpoint={run_dir}", "--resolutions=32,32x48"]) == 0
    lines = capsys.readouterr().out.splitlines()
    sizes = ("32", "32x48")
    assert lines[0].startswith("miou in % on the test split of ")
    assert (
        lines[2]
        == "| Model | Params | " + " | ".join(f"{s}({m}, %)" for s in sizes for m in ("mIoU", "aAcc", "mAcc")) + " |"
    )
    cells = lines[4].strip("|").split("|")
    assert cells[0].strip() == "run" and all(0 <= float(c.split("(")[0]) <= 100 for c in cells[2:])
    assert re.fullmatch(r"run at 32x48 on test: miou [\d.]+%  aacc [\d.]+%  macc [\d.]+%", lines[-2])
    assert main(["eval", f"--checkpoint={run_dir}", "--data=synthetic:direction:img=32"]) == 2
    assert "trained for segmentation" in capsys.readouterr().err


def test_resume_from_a_mid_epoch_checkpoint_is_exact(tmp_path: Path) -> None:
    full_dir, cut_dir = tmp_path / "full", tmp_path / "cut"
    full = train(*request(save_every=2, keep_checkpoints=100, run_dir=str(full_dir)).resolve())
    (cut_dir / "checkpoints").mkdir(parents=True)  # the run died after step 2 of 8 (mid-epoch 1)
    (full_dir / "checkpoints" / "step-00000002").rename(cut_dir / "checkpoints" / "step-00000002")
    resumed = train(*request(save_every=2, run_dir=str(cut_dir)).resolve(), resume=True)
    assert without_times(resumed.history) == without_times(full.history)
    assert {"train_miou", "val_miou", "val_aacc"} <= set(full.history[-1])
    assert all(torch.equal(p, q) for p, q in zip(full.model.parameters(), resumed.model.parameters(), strict=True))
    assert resumed.test == full.test and 0 <= full.test["miou"] <= 100


def test_bf16_autocast_on_cpu_trains(tmp_path: Path) -> None:
    result = train(*request(epochs=1, amp=True, cpu_amp=True, amp_dtype="bfloat16").resolve())
    assert all(math.isfinite(row["train_loss"]) for row in result.history)
    assert 0 <= result.test["miou"] <= 100


@pytest.mark.parametrize(
    "preset, data, message",
    [
        ("pvt_tiny", DATA, "is a segmentation task, but the model .* is not a segmenter"),
        ("pvt_tiny_fpn", DIRECTION, "is a classification task, but the model .* is a segmenter"),
    ],
)
def test_models_and_data_of_different_tasks_are_refused(preset: str, data: str, message: str) -> None:
    model = {k: v for k, v in TINY_FPN.items() if preset.endswith("_fpn") or k in HOST_FIELDS}
    with pytest.raises(VitposError, match=message):
        train(*RunRequest(preset, model, {"data": data, "epochs": 1, "batch_size": 8, "progress": False}).resolve())


def test_augmentations_that_move_pixels_are_refused() -> None:
    with pytest.raises(ValueError, match="hflip move or hide things within the image"):
        train(*request(hflip=0.5).resolve())


def test_init_loads_a_classifiers_weights_into_the_host(tmp_path: Path) -> None:
    host_fields = {k: v for k, v in TINY_FPN.items() if k in HOST_FIELDS}
    source = vitpos.create_model("pvt_tiny", img_size=32, num_classes=10, **host_fields)
    torch.save(source.state_dict(), tmp_path / "classifier.pth")
    # at lr 0 the weights stay as loaded
    result = train(*request(epochs=1, lr=0.0, min_lr=0.0, init=str(tmp_path / "classifier.pth")).resolve())
    host = result.model.backbone.state_dict()
    assert all(torch.equal(v, host[k]) for k, v in source.state_dict().items() if not k.startswith("head"))
