"""The DeiT recipe end to end on real photographs: one process, two under torchrun, and exact resumes."""

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from vitpos.cli import build_parser, main
from vitpos.commands.train import build_request
from vitpos.engine import RunRequest, train
from vitpos.engine.recipes import get_recipe

from ..photos import photo_folder
from .conftest import without_times

SRC = str(Path(__file__).resolve().parents[2] / "src")
TINY_DEIT = {"img_size": 32, "patch_size": 8, "depth": 1}
"""deit_tiny_patch16_224 cut to one block on a 4 x 4 grid of 8-px patches."""
SHORT = {"epochs": 2, "batch_size": 8, "warmup_epochs": 1, "progress": False}
"""The recipe's every augmentation, over a run of six steps."""


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """A folder of JPEG crops of scikit-learn's sample photographs (4 classes, 24 + 8 images), and its shards."""
    root = tmp_path_factory.mktemp("photos")
    photo_folder(root / "folder", per_class=6, held=2)
    assert main(["shard", f"folder:{root / 'folder'}", str(root / "shards"), "--per-shard=6"]) == 0
    shards = f"wds:{root}/shards/train-{{000000..000003}}.tar:val={root}/shards/val-{{000000..000001}}.tar"
    return {"folder": f"folder:{root / 'folder'}", "wds": shards}


def _request(data: str, **train_options) -> RunRequest:
    recipe = get_recipe("deit")
    options = {**recipe.train, "data": data, **SHORT, **train_options}
    return RunRequest("deit_tiny_patch16_224", {**recipe.model, **TINY_DEIT}, options)


def test_deit_recipe_trains_on_photographs_from_the_command_line(photos, tmp_path, capsys):
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in {**TINY_DEIT, **SHORT}.items() if k != "progress"]
    run_dir = tmp_path / "run"
    argv = ["train", "--recipe=deit", "--model=deit_tiny_patch16_224", f"--data={photos['folder']}", *flags]
    assert main([*argv, "--workers=1", "--no-progress", f"--run-dir={run_dir}"]) == 0
    assert f"run folder {run_dir}: val loss" in capsys.readouterr().out  # the folder has no test split
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [3, 6] and all(torch.isfinite(torch.tensor(r["train_loss"])) for r in rows)
    assert "val_acc1" in rows[-1]
    # evaluation with the run's crop fraction (0.875), or another
    assert main(["eval", f"--checkpoint={run_dir}"]) == 0
    assert main(["eval", f"--checkpoint={run_dir}", "--eval-crop=1.0"]) == 0
    assert capsys.readouterr().out.count("| run |") == 2
    assert main(["eval", f"--checkpoint={run_dir}", "--eval-crop=1.5"]) == 2
    assert "--eval-crop 1.5 must lie in (0, 1]" in capsys.readouterr().err
    # resuming under the recipe keeps the values the run was saved with (the recipe is the lowest layer)
    resumed = build_request(build_parser().parse_args(["train", "--recipe=deit", "--resume", f"--run-dir={run_dir}"]))
    assert (resumed.train["epochs"], resumed.train["batch_size"], resumed.train["randaugment"]) == (
        2,
        8,
        "rand-m9-mstd0.5-inc1",
    )


@pytest.mark.parametrize("source", ["folder", "wds"])
def test_resume_mid_epoch_replays_the_same_batches(photos, tmp_path, source):
    full_dir, cut_dir = tmp_path / "full", tmp_path / "cut"
    full = train(*_request(photos[source], save_every=2, keep_checkpoints=100, run_dir=str(full_dir)).resolve())
    # the run dies after step 4 of 6 (mid-epoch 2): resume from that checkpoint alone
    (cut_dir / "checkpoints").mkdir(parents=True)
    shutil.copytree(full_dir / "checkpoints" / "step-00000004", cut_dir / "checkpoints" / "step-00000004")
    resumed = train(*_request(photos[source], save_every=2, run_dir=str(cut_dir)).resolve(), resume=True)
    assert without_times(resumed.history) == without_times(full.history)
    assert all(torch.equal(p, q) for p, q in zip(full.model.parameters(), resumed.model.parameters(), strict=True))


def test_deit_recipe_under_torchrun_with_two_processes(photos, tmp_path):
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in {**TINY_DEIT, **SHORT, "epochs": 1}.items() if k != "progress"]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", "vitpos"]
    cmd += ["train", "--recipe=deit", "--model=deit_tiny_patch16_224", f"--data={photos['folder']}", *flags]
    cmd += [f"--run-dir={tmp_path / 'ddp'}", "--no-progress", "--device=cpu"]
    env = {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("run folder") == 1  # one writer
    rows = [json.loads(line) for line in (tmp_path / "ddp" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [3]  # 24 images / global batch 8, the same on both processes


def test_lr_scales_with_the_batch_and_the_cool_down_holds_the_floor():
    from .conftest import tiny_request

    request = tiny_request(n=64, epochs=3, batch_size=32, lr=1e-3, lr_batch=16, min_lr=1e-5, warmup_epochs=1)
    request.train["cooldown_epochs"] = 1
    rows = train(*request.resolve()).history
    # 2 steps per epoch: warm-up ends at step 2 at lr * 32 / 16; the cosine reaches min_lr at step 4 and stays
    assert [r["lr"] for r in rows] == pytest.approx(
        [2e-3, 1e-5 + 0.5 * (2e-3 - 1e-5) * (1 + math.cos(math.pi / 2)), 1e-5]
    )


def test_cool_down_must_leave_epochs_for_the_schedule():
    from vitpos.engine import TrainConfig
    from vitpos.errors import ConfigError

    with pytest.raises(ConfigError, match="cooldown_epochs = 3 leaves no epoch of the 3"):
        TrainConfig(epochs=3, cooldown_epochs=3)
