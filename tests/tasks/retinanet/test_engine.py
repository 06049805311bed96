"""RetinaNet through the engine and the CLI: ``vitpos train --model retinanet_* --data coco:PATH``, then eval."""

from __future__ import annotations

import pytest
import torch

from bench.data.coco_fixture import write_coco_fixture
from vitpos.cli import main
from vitpos.engine import RunRequest
from vitpos.engine.train import train

from .conftest import tiny_retinanet

SMALL = {k: v for k, v in tiny_retinanet().to_dict().items() if k not in ("arch", "num_classes", "img_size")}
"""The tiny RetinaNet's fields, as overrides of a preset."""


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny detectors run faster on one thread where cores are shared."""


def test_training_on_coco_files_reports_loss_and_ap(tmp_path) -> None:
    root = write_coco_fixture(tmp_path / "coco", train=8, val=4)
    options = {"data": f"coco:{root}", "epochs": 2, "batch_size": 4, "lr": 1e-3, "warmup_epochs": 0,
               "progress": False, "device": "cpu", "run_dir": str(tmp_path / "run")}  # fmt: skip
    model_cfg, train_cfg, data = RunRequest("retinanet_pvt_tiny_peg", {"img_size": 64}, options).resolve()
    assert (
        model_cfg.num_classes == 2 and model_cfg.position.conditional == "peg@0"
    )  # classes from the data, PEG from the preset
    result = train(model_cfg.replace(**SMALL), train_cfg, data)
    first, last = result.history[0], result.history[-1]
    assert {"train_loss", "val_loss", "val_AP", "val_AP50"} <= set(last) and last["train_loss"] < first["train_loss"]
    assert {"loss", "AP", "AP50", "AP75"} <= set(result.test) and 0 <= result.test["AP"] <= 100
    assert torch.isfinite(torch.tensor(result.test["loss"]))


def test_cli_trains_and_evaluates_a_retinanet(tmp_path, capsys) -> None:
    root = write_coco_fixture(tmp_path / "coco", train=4, val=2)
    run = tmp_path / "run"
    sizes = ["--embed-dims=8,16,24,32", "--depths=1,1,1,1", "--num-heads=1,2,3,4", "--mlp-ratios=2,2,2,2"]
    assert main(["train", "--model=retinanet_pvt_tiny_peg", f"--data=coco:{root}", "--img-size=64", *sizes,
                 "--epochs=1", "--batch-size=4", "--no-progress", "--device=cpu", f"--run-dir={run}"]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["eval", f"--checkpoint={run}", "--resolutions=64,64x96", "--device=cpu"]) == 0
    table = capsys.readouterr().out
    assert "64(AP, %)" in table and "64x96(AP, %)" in table
