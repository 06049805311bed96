"""The engine on detection: train, checkpoint, exact resume, eval with AP, bf16 autocast, mismatched tasks."""

import json
import re
from pathlib import Path

import pytest
import torch

from vitpos.cli import main
from vitpos.engine import RunRequest
from vitpos.engine.evaluate import evaluate
from vitpos.engine.train import train
from vitpos.errors import VitposError
from vitpos.tasks import task_kind

DATA = "synthetic:detect:objects=2:min=4:max=8:train=32:val=16:test=16"


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny detectors run faster on one thread where cores are shared."""


def request(**train) -> RunRequest:
    options = {
        "data": DATA,
        "epochs": 2,
        "batch_size": 8,
        "lr": 1e-3,
        "warmup_epochs": 0,
        "progress": False,
        "device": "cpu",
        **train,
    }
    return RunRequest("detr_tiny_sine", {}, options)


def oracle_outputs(rows: torch.Tensor, shuffle_boxes: bool = False) -> dict:
    """DETR outputs that name each target's class with certainty and "no object" elsewhere; boxes
    the targets' (or, with ``shuffle_boxes``, another image's)."""
    logits = torch.full((*rows.shape[:2], 5), -20.0)
    logits[..., -1] = 0.0
    real = rows[..., 0] >= 0
    logits[real] = torch.nn.functional.one_hot(rows[real, 0].long(), 5).float() * 40 - 20
    boxes = rows[..., 1:].flip(0) if shuffle_boxes else rows[..., 1:]
    return {"pred_logits": logits, "pred_boxes": boxes.clamp(min=1e-3)}


def small_detr(cfg):
    return cfg.replace(stem_widths=(8, 16), embed_dim=32, enc_depth=1, dec_depth=1, num_queries=4)


def resolve(req: RunRequest):
    model_cfg, train_cfg, data = req.resolve()
    return small_detr(model_cfg), train_cfg, data


def test_training_reports_loss_and_ap_and_resumes_exactly(tmp_path):
    full_dir, cut_dir = tmp_path / "full", tmp_path / "cut"
    full = train(*resolve(request(epochs=2, save_every=2, keep_checkpoints=100, eval_every=2, run_dir=str(full_dir))))
    assert full.model.cfg.img_size == 32 and full.model.cfg.num_classes == 4  # filled from the data
    assert {"train_loss", "val_loss", "val_AP", "val_AP50", "val_AP75"} <= set(full.history[-1])
    assert {"loss", "AP", "AP50", "AP75", "APs"} <= set(full.test) and 0 <= full.test["AP"] <= 100
    # pretend the run died after step 2 of 8 (mid-epoch 1)
    (cut_dir / "checkpoints").mkdir(parents=True)
    (full_dir / "checkpoints" / "step-00000002").rename(cut_dir / "checkpoints" / "step-00000002")
    resumed = train(*resolve(request(epochs=2, save_every=2, eval_every=2, run_dir=str(cut_dir))), resume=True)
    assert all(torch.equal(p, q) for p, q in zip(full.model.parameters(), resumed.model.parameters(), strict=True))
    assert resumed.test == full.test


def test_bf16_autocast_on_cpu_trains_and_evaluates():
    result = train(*resolve(request(epochs=1, amp=True, cpu_amp=True)))
    assert torch.isfinite(torch.tensor(result.history[-1]["train_loss"])) and "AP" in result.test


def test_training_log_gives_ap_in_percent_as_the_eval_table_does(caplog):
    with caplog.at_level("INFO", logger="vitpos.train"):
        result = train(*resolve(request(epochs=1)))
    epoch_line, test_line = (r.getMessage() for r in caplog.records if r.getMessage().startswith(("epoch ", "test:")))
    for line, metrics, prefix in ((epoch_line, result.history[-1], "val_"), (test_line, result.test, "")):
        for name in ("AP", "AP50", "AP75"):
            assert f"{prefix}{name} {metrics[prefix + name]:.1f}% " in line + " "
        assert f"{prefix}loss {metrics[prefix + 'loss']:.4g} " in line + " "  # a loss has no unit


def test_task_kinds_format_only_their_percentages_with_a_percent_sign():
    detection, regression = task_kind("detection"), task_kind("regression")
    assert detection.format_metric("ema_val_APm", 41.25) == "ema_val_APm 41.2%"
    assert detection.format_metric("AP", 7.06) == "AP 7.1%"
    assert detection.format_metric("train_loss", 1.23456) == "train_loss 1.235"
    assert task_kind("segmentation").format_metric("val_miou", 55.55) == "val_miou 55.5%"
    assert regression.format_metric("val_r2", 0.98765) == "val_r2 0.9877"


def test_eval_command_prints_ap_at_several_sizes(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "--model=detr_tiny_sine", f"--data={DATA}", "--epochs=1",
                 "--batch-size=16", "--no-progress", "--device=cpu", f"--run-dir={run}"]) == 0  # fmt: skip
    assert re.search(
        rf"run folder {re.escape(str(run))}: test loss [\d.]+  AP \d+\.\d%  AP50 \d+\.\d%", capsys.readouterr().out
    )
    assert main(["eval", f"--checkpoint={run}", "--resolutions=32,32x48", "--device=cpu"]) == 0
    table = capsys.readouterr().out
    assert "32(AP, %)" in table and "32x48(AP, %)" in table
    # every COCO number, as DETR's evaluation prints them; 32-pixel images hold only small objects
    assert re.search(
        r"run at 32x48 on test: AP \d+\.\d%  AP50 \d+\.\d%  AP75 \d+\.\d%  APs \d+\.\d%  APm -  APl -", table
    )
    assert "eval_crop" not in json.loads((run / "eval-test-at32,32x48.json").read_text())  # photographs only


def test_evaluate_gives_ap_100_for_a_model_that_outputs_the_truth():
    data = RunRequest("detr_tiny_sine", {}, {"data": DATA}).resolve()[2].test

    class Oracle(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(1))
            self.targets = data[torch.arange(len(data))][1].targets

        def criterion(self):
            from vitpos.tasks.detection import SetCriterion

            return SetCriterion(4)

        def forward(self, x, padding_mask=None):
            rows = self.targets[self.index : self.index + len(x)]
            self.index += len(x)
            return oracle_outputs(rows)

    oracle = Oracle()
    oracle.index = 0
    metrics = evaluate(oracle, data, batch_size=5)
    assert metrics["AP"] == pytest.approx(100.0) and metrics["loss"] < 1e-3


def test_a_detector_on_class_labels_and_a_classifier_on_boxes_are_refused():
    with pytest.raises(VitposError, match="use detection data"):
        train(
            *RunRequest(
                "detr_tiny_sine",
                {},
                {"data": "synthetic:direction:img=32:train=8:val=8:test=8", "epochs": 1, "batch_size": 8},
            ).resolve()
        )
    with pytest.raises(VitposError, match="use a detr_\\* or retinanet_\\* preset"):
        train(*RunRequest("thesis_vit", {"patch_size": 4}, {"data": DATA, "epochs": 1, "batch_size": 8}).resolve())


def test_label_mixing_is_refused_for_detection():
    with pytest.raises(ValueError, match="need a classification task"):
        train(*resolve(request(mixup=0.8)))


def test_two_process_run_gathers_detections_for_ap(tmp_path):
    """Under torchrun (gloo, CPU) each process evaluates half the test images; the AP it reports is
    that of the final model evaluated in one process on all of them. (The set loss is not a sum over
    images, since it normalises by the objects of a batch, so it depends on how images are batched.)"""
    import json
    import os
    import subprocess
    import sys

    from vitpos.data.catalog import open_data
    from vitpos.weights import load_model

    run = tmp_path / "ddp"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3] / "src"), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m", "vitpos", "train",
           "--model=detr_tiny_sine", f"--data={DATA}", "--epochs=2", "--batch-size=8", "--lr=3e-3", "--eval-every=2",
           f"--run-dir={run}", "--no-progress", "--device=cpu"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("run folder") == 1  # one writer
    reported = json.loads((run / "summary.json").read_text())["test"]
    model, _ = load_model(run)
    alone = evaluate(model, open_data(DATA).test, batch_size=8)
    assert reported.keys() == alone.keys() and {"AP", "AP50", "APs"} <= set(alone)
    for key in set(alone) - {"loss"}:
        assert reported[key] == pytest.approx(alone[key], rel=1e-4, abs=1e-6), key
    assert reported["loss"] == pytest.approx(alone["loss"], rel=0.05)


def _gather_half(rank: int, init: str, out: str) -> None:
    """One of two gloo processes: half the images' perfect detections; the gathered AP is written by rank 0."""
    import json

    import torch.distributed as dist

    from vitpos.data.synthetic_detect import SyntheticDetection
    from vitpos.engine.distributed import Dist
    from vitpos.tasks.detection import DetectionMetrics

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    targets = SyntheticDetection(test=12).render("test")[torch.arange(12)][1].targets[rank * 6 : rank * 6 + 6]
    metrics = DetectionMetrics(4, "cpu", image_hw=(32, 32))
    # the second half predicts shuffled boxes: a gather that dropped it would score 100
    metrics.add_predictions(oracle_outputs(targets, shuffle_boxes=rank == 1), targets)
    result = metrics.reduced(Dist(rank, 2)).compute()
    if rank == 0:
        Path(out).write_text(json.dumps(result))
    dist.destroy_process_group()


def test_detections_of_every_process_enter_the_ap(tmp_path):
    import json

    import torch.multiprocessing as mp

    from vitpos.data.synthetic_detect import SyntheticDetection
    from vitpos.tasks.detection import DetectionMetrics

    out = tmp_path / "ap.json"
    mp.spawn(_gather_half, args=(f"file://{tmp_path / 'store'}", str(out)), nprocs=2)
    gathered = json.loads(out.read_text())
    alone = DetectionMetrics(4, "cpu", image_hw=(32, 32))
    targets = SyntheticDetection(test=12).render("test")[torch.arange(12)][1].targets
    for half in (0, 1):
        rows = targets[half * 6 : half * 6 + 6]
        alone.add_predictions(oracle_outputs(rows, shuffle_boxes=half == 1), rows)
    expected = alone.compute()
    assert 10 < expected["AP"] < 90  # the shuffled half counts
    assert gathered == pytest.approx(expected)
